package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// rayProbe prints "found" when the Python running it can import ray by itself, from its
// PYTHONPATH, user site or site-packages. It first takes the working folder ("" under -c)
// off the front of sys.path: a ray/ that someone else created in a shared working folder
// would otherwise answer "found", and the workers that Trainyard starts (a driver's gang:
// ray.train._driver.WORKER_BOOT, which takes it off too) would get no ray at all. It is
// not -I, which would also ignore PYTHONPATH and the user site, where a real Ray may be.
const rayProbe = `import sys; sys.path[:1] = [p for p in sys.path[:1] if p]; import importlib.util; ` +
	`sys.stdout.write("found" if importlib.util.find_spec("ray") else "missing")`

// rayProbeTimeout bounds the probe: a Python that has not answered by then is taken as
// one that has ray, so that nothing is offered to it.
const rayProbeTimeout = 60 * time.Second

// offerRay reports whether the workers get the ray compatibility package (l.RayCompat).
// When the job's command says which Python it runs (a Python interpreter, a script whose
// #! line names one, such as torchrun, or a shell command whose first word is one: sh -c
// "python3 train.py"), that Python, with the workers' environment and working folder, is
// asked once, before the first attempt, and the package is offered only when it cannot
// import ray: a folder on PYTHONPATH comes before site-packages. Any other command (a
// shell command line such as "cd src && python train.py", bash -c, a wrapper script,
// which Ray's job entrypoints often are) gets the package too, since any Python it starts
// may run a Ray Train script: the package then defers to a real Ray by itself, where the
// Python that imports it has one (python/compat/ray/_real.py).
func (l *Launcher) offerRay(ctx context.Context) (bool, error) {
	argv := pythonArgv(l.path)
	if argv == nil {
		argv = shellPythonArgv(l.Job, l.path)
	}
	if argv == nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rayProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-c", rayProbe)...)
	cmd.Dir = l.Job.Spec.WorkingDir
	cmd.Env = Env(l.Job, Proc{Attempt: 1, HostProcs: 1}, l.runDir(), os.Environ(), l.ExtraEnv)
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

// shellNames are the shells whose -c STRING commands offerRay looks into.
var shellNames = map[string]bool{"sh": true, "bash": true, "dash": true}

// assignment is a VAR=value word before a shell command's program.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// shellPythonArgv returns how to start the Python that a job's `sh -c STRING` command
// runs first: the string's first word after VAR=value assignments (and exec or env),
// found on the job's PATH and taken as pythonArgv takes a program. It returns nil when
// the command is not a shell's -c or its first word is not Python.
func shellPythonArgv(job *v1.TrainJob, shell string) []string {
	cmd := job.Spec.Command
	if !shellNames[filepath.Base(shell)] || len(cmd) < 3 || cmd[1] != "-c" {
		return nil
	}
	for _, word := range strings.Fields(cmd[2]) {
		if assignment.MatchString(word) || word == "exec" || word == "env" {
			continue
		}
		path, err := lookName(job, word)
		if err != nil {
			return nil
		}
		return pythonArgv(path)
	}
	return nil
}
