package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// rayProbe prints "found" when the Python running it can import ray by itself.
const rayProbe = `import importlib.util, sys; sys.stdout.write("found" if importlib.util.find_spec("ray") else "missing")`

// rayProbeTimeout bounds the probe: a Python that has not answered by then is taken as
// one that has ray, so that nothing is offered to it.
const rayProbeTimeout = 60 * time.Second

// offerRay reports whether the workers get the ray compatibility package (l.RayCompat):
// only when the job runs Python (the command is a Python interpreter, or a script whose
// #! line names one, such as torchrun) and that Python, with the workers' environment
// and working folder, cannot import ray. A folder on PYTHONPATH comes before
// site-packages, so offering the package to a Python that has Ray would shadow it; the
// probe asks the job's own Python once, before the first attempt.
func (l *Launcher) offerRay(ctx context.Context) (bool, error) {
	argv := pythonArgv(l.path)
	if argv == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rayProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-c", rayProbe)...)
	cmd.Dir = l.Job.Spec.WorkingDir
	cmd.Env = Env(l.Job, Proc{Attempt: 1, HostProcs: 1}, l.Folder.Dir, os.Environ(), l.ExtraEnv)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("ask %s whether it has ray: %w: %s", strings.Join(argv, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return string(out) == "missing", nil
}

// pythonArgv returns how to start the Python that runs the program at path: the program
// itself when it is a Python interpreter, the #! line of a script that names one, or
// nil when the program is not Python.
func pythonArgv(path string) []string {
	if pythonName.MatchString(filepath.Base(path)) {
		return []string{path}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	line, _, _ := bytes.Cut(head[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return nil
	}
	argv := strings.Fields(string(rest))
	isPython := func(a string) bool { return pythonName.MatchString(filepath.Base(a)) }
	if len(argv) == 0 || !slices.ContainsFunc(argv, isPython) {
		return nil
	}
	return argv
}
