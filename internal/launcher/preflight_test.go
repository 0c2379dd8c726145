package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// A Python command whose script does not exist is refused before anything starts,
// naming the script and the folder it was looked for in; Python's own ways of running no
// file (-c, -m, the standard input) and other programs' arguments are left alone.
func TestPreflightPythonScript(t *testing.T) {
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "train.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := "script missing.py (run by python3) does not exist in the working folder " + wd +
		": the workers start there (--workdir), so give the script's path from there"
	cases := map[string]struct {
		command []string
		args    []string
		want    string // "" for no error
	}{
		"a script that exists":          {command: []string{"python3", "train.py", "--lr", "0.1"}},
		"a missing script":              {command: []string{"python3", "missing.py"}, want: missing},
		"a missing script in args":      {command: []string{"python3"}, args: []string{"missing.py"}, want: missing},
		"after options":                 {command: []string{"python3", "-u", "-W", "ignore", "-X", "dev", "-OO", "missing.py"}, want: missing},
		"after a grouped option value":  {command: []string{"python3", "-uWignore", "-Xdev", "missing.py"}, want: missing},
		"after --":                      {command: []string{"python3", "-u", "--", "missing.py"}, want: missing},
		"an absolute path":              {command: []string{"python3", "/nonexistent/train.py"}, want: "script /nonexistent/train.py (run by python3) does not exist"},
		"python with a version":         {command: []string{"python3.11", "missing.py"}, want: "script missing.py (run by python3.11) does not exist"},
		"an interpreter's path":         {command: []string{"/usr/bin/python3", "missing.py"}, want: "script missing.py (run by python3) does not exist"},
		"-c":                            {command: []string{"python3", "-c", "print(1)", "missing.py"}},
		"-c in a group":                 {command: []string{"python3", "-uc", "print(1)", "missing.py"}},
		"-m":                            {command: []string{"python3", "-m", "torch.distributed.run", "missing.py"}},
		"the standard input":            {command: []string{"python3", "-", "missing.py"}},
		"a long option":                 {command: []string{"python3", "--check-hash-based-pycs", "never", "missing.py"}},
		"not a .py file":                {command: []string{"python3", "missing"}},
		"a script's own argument":       {command: []string{"python3", "train.py", "missing.py"}},
		"another program":               {command: []string{"sh", "missing.py"}},
		"a program named like python":   {command: []string{"pythonista", "missing.py"}},
		"an option value that is a .py": {command: []string{"python3", "-W", "x.py", "train.py"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: tc.command, Args: tc.args, WorkingDir: wd,
				StoragePath: filepath.Join(t.TempDir(), "runs")}}
			if err := jobspec.Default(job, jobspec.Env{}); err != nil {
				t.Fatal(err)
			}
			err := CheckScript(job)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckScript: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("CheckScript: %v, want %q", err, tc.want)
			}
		})
	}
}

// Preflight runs the check.
func TestPreflightRefusesAMissingScript(t *testing.T) {
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"sh", "-c", "exit 0"}, WorkingDir: t.TempDir(),
		StoragePath: filepath.Join(t.TempDir(), "runs")}}
	if err := jobspec.Default(job, jobspec.Env{}); err != nil {
		t.Fatal(err)
	}
	// sh stands in for python: only the name matters, so link it as python3.
	bin := t.TempDir()
	if err := os.Symlink("/bin/sh", filepath.Join(bin, "python3")); err != nil {
		t.Fatal(err)
	}
	job.Spec.Command = []string{filepath.Join(bin, "python3"), "missing.py"}
	if err := Preflight(job); err == nil || !strings.Contains(err.Error(), "script missing.py (run by python3) does not exist") {
		t.Errorf("Preflight: %v, want the missing script refused", err)
	}
}
