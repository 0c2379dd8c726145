package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// Preflight checks what a valid job needs from this machine before anything starts: the
// working folder exists, the command can be found and run, the script a Python command
// runs exists, and the storage path can be written. It changes nothing on disk.
func Preflight(job *v1.TrainJob) error {
	s := &job.Spec
	_, fromGit := jobspec.GitSource(s)
	// The code of a git source, and the run folder the workers then start in, exist once
	// it is cloned: CheckScript runs again after that.
	if runDir := jobspec.RunFolder(s); !fromGit || s.WorkingDir != runDir {
		if err := checkDir(s.WorkingDir); err != nil {
			return fmt.Errorf("working folder (--workdir): %w", err)
		}
	}
	if _, err := LookPath(job); err != nil {
		return err
	}
	if err := CheckScriptEarly(job); err != nil {
		return err
	}
	if _, err := prestartSetting(job); err != nil {
		return err
	}
	if err := checkWritable(jobspec.LocalStorage(s.StoragePath)); err != nil {
		return fmt.Errorf("storage path (--storage-path) %s: %w", s.StoragePath, err)
	}
	return nil
}

// pythonName is the base name of a Python interpreter: python, python3, python3.11.
var pythonName = regexp.MustCompile(`^python[0-9.]*$`)

// CheckScript refuses a job whose command is a Python interpreter told to run a .py file
// that does not exist, as Python would fail in every worker after the run has begun.
// Other programs' arguments are theirs to judge.
func CheckScript(job *v1.TrainJob) error {
	argv := append(slices.Clip(job.Spec.Command), job.Spec.Args...)
	if !pythonName.MatchString(filepath.Base(argv[0])) {
		return nil
	}
	script, ok := pythonScript(argv[1:])
	if !ok || !strings.HasSuffix(script, ".py") {
		return nil
	}
	p := script
	if !filepath.IsAbs(p) {
		p = filepath.Join(job.Spec.WorkingDir, p)
	}
	if _, err := os.Stat(p); err != nil {
		why := "does not exist"
		if !errors.Is(err, fs.ErrNotExist) {
			why = "cannot be read: " + err.Error()
		}
		msg := fmt.Sprintf("script %s (run by %s) %s", script, filepath.Base(argv[0]), why)
		if !filepath.IsAbs(script) {
			msg += fmt.Sprintf(" in the working folder %s: the workers start there (--workdir), so give the script's path from there",
				job.Spec.WorkingDir)
		}
		return errors.New(msg)
	}
	return nil
}

// CheckScriptEarly checks what can be checked of the script a Python command runs
// before anything is created: that it exists in the working folder (CheckScript); for a
// git source whose workers start in the run folder, where the code is not cloned yet,
// that a relative path leads into the clone (code/<repo>/...), naming the path that
// would. FetchSource checks the script once the code is cloned.
func CheckScriptEarly(job *v1.TrainJob) error {
	src, fromGit := jobspec.GitSource(&job.Spec)
	if !fromGit {
		return CheckScript(job)
	}
	runDir := jobspec.RunFolder(&job.Spec)
	argv := append(slices.Clip(job.Spec.Command), job.Spec.Args...)
	if job.Spec.WorkingDir != runDir || !pythonName.MatchString(filepath.Base(argv[0])) {
		return nil
	}
	script, ok := pythonScript(argv[1:])
	if !ok || filepath.IsAbs(script) || !strings.HasSuffix(script, ".py") {
		return nil
	}
	code := filepath.Join("code", gitsource.RepoName(src.URL))
	if clean := filepath.Clean(script); clean == code || strings.HasPrefix(clean, code+string(filepath.Separator)) {
		return nil
	}
	return fmt.Errorf("script %s (run by %s) is not in the run folder %s, where the workers start; "+
		"with --sync-source the code is at %s: give %s", script, filepath.Base(argv[0]), runDir,
		filepath.Join(code, script), filepath.Join(code, script))
}

// pythonScript returns the file a Python interpreter given args runs: the first argument
// that is not an option or an option's value. It is false when Python runs no file: -c,
// -m, '-' (the standard input), or an option it does not know of, whose value could be
// taken for a file.
func pythonScript(args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		case a == "-" || strings.HasPrefix(a, "--"):
			return "", false
		case !strings.HasPrefix(a, "-"):
			return a, true
		}
		noFile, takes := shortOptions(a[1:])
		if noFile {
			return "", false
		}
		i += takes
	}
	return "", false
}

// pythonFlags are Python's short options that take no value and let it run a file.
const pythonFlags = "bBdEiIOPqsSuvxR"

// shortOptions reads a group of Python's short options without its '-' ("u", "OO",
// "Wignore", "uc"): whether Python then runs no file (-c, -m, or an option not known
// here), and how many of the following arguments the group takes as a value.
func shortOptions(group string) (noFile bool, takes int) {
	for j, c := range group {
		switch {
		case c == 'W' || c == 'X':
			if j == len(group)-1 {
				return false, 1
			}
			return false, 0 // the rest of the group is the value
		case !strings.ContainsRune(pythonFlags, c):
			return true, 0
		}
	}
	return false, 0
}

func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	return nil
}

// LookPath finds the job's program as the workers will: a name with a slash is taken
// relative to the working folder, a bare name is searched in the PATH the workers get.
func LookPath(job *v1.TrainJob) (string, error) {
	return lookName(job, job.Spec.Command[0])
}

// lookName finds the program name as LookPath does for the job's command.
func lookName(job *v1.TrainJob, name string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(job.Spec.WorkingDir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return p, nil
	}
	path := os.Getenv("PATH")
	for _, e := range job.Spec.Env {
		if e.Name == "PATH" {
			path = e.Value
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(job.Spec.WorkingDir, dir)
		}
		if p := filepath.Join(dir, name); checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q: not found in PATH (%s)", name, path)
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist", p)
		}
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a folder", p)
	}
	if unix.Access(p, unix.X_OK) != nil {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// checkWritable reports whether dir, or the nearest folder above it that exists, can be
// written, without creating anything.
func checkWritable(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a folder", p)
			}
			if unix.Access(p, unix.W_OK|unix.X_OK) != nil {
				return fmt.Errorf("%s is not writable", p)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			return err
		}
		if p == filepath.Dir(p) {
			return fmt.Errorf("no folder of %s exists", dir)
		}
	}
}
