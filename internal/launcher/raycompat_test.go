package launcher

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

const systemPython = "/usr/bin/python3"

// fakeRay writes a package ray into a new folder whose __init__.py says who it is, and
// returns the folder.
func fakeRay(t *testing.T, who string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ray"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ray", "__init__.py"), []byte("WHO = "+`"`+who+`"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The workers get Trainyard's ray only when their Python cannot import one by itself.
func TestRayCompatNeverShadowsARealRay(t *testing.T) {
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s", systemPython)
	}
	cases := map[string]struct {
		jobPath, inherited string // the job's PYTHONPATH, the caller's
		inWorkdir          bool
		inSitePackages     bool // after PYTHONPATH in sys.path: what an appended folder would shadow
		shell              bool // the command is sh -c "python3 ...", as Ray's job entrypoints
		safePath           bool // the command is python3 -P: the working folder is not on its path
		want               string
	}{
		"ray in site-packages":             {inSitePackages: true, want: "user"},
		"no ray anywhere":                  {want: "trainyard"},
		"ray on the job's PYTHONPATH":      {jobPath: "user", want: "user"},
		"ray on the inherited PYTHONPATH":  {inherited: "user", want: "user"},
		"ray in the working folder":        {inWorkdir: true, want: "user"},
		"another folder on the job's path": {jobPath: "empty", want: "trainyard"},
		"no ray, run by a shell":           {shell: true, want: "trainyard"},
		"ray in site-packages, by a shell": {shell: true, inSitePackages: true, want: "user"},
		// The driver's workers start so (ray.train._driver.WORKER_BOOT): a ray/ that someone
		// else made in a shared working folder must not make the probe withhold Trainyard's.
		"ray in the working folder, which the command does not import from": {inWorkdir: true, safePath: true, want: "trainyard"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			user := fakeRay(t, "user")
			paths := map[string]string{"user": user, "empty": t.TempDir(), "": ""}
			t.Setenv("PYTHONPATH", paths[c.inherited])
			b := makeJob(t, "")
			job := b.job
			job.Spec.Command = []string{systemPython, "-c", "import ray; print('ray is', ray.WHO)"}
			if c.shell {
				job.Spec.Command = []string{"/bin/sh", "-c", `X=1 python3 -c "import ray; print('ray is', ray.WHO)"`}
			}
			if c.safePath {
				job.Spec.Command = []string{systemPython, "-P", "-c", "import ray; print('ray is', ray.WHO)"}
			}
			if c.jobPath != "" {
				job.Spec.Env = []v1.EnvVar{{Name: "PYTHONPATH", Value: paths[c.jobPath]}}
			}
			if c.inSitePackages {
				t.Setenv("PYTHONUSERBASE", userBase(t, user))
			}
			if c.inWorkdir {
				os.Rename(filepath.Join(user, "ray"), filepath.Join(job.Spec.WorkingDir, "ray"))
			}
			b.obj(t)
			h := newHarness(t, job)
			h.l.ExtraEnv = map[string]string{"PYTHONPATH": t.TempDir()} // the trainyard helper's folder
			h.l.RayCompat = fakeRay(t, "trainyard")
			res, _ := h.run(t, context.Background())
			if res.Outcome != Succeeded || !strings.Contains(h.out.String(), "ray is "+c.want) {
				t.Errorf("outcome %s, want ray is %s; output:\n%s", res.Outcome, c.want, h.out)
			}
		})
	}
}

// userBase returns a PYTHONUSERBASE whose site-packages holds the ray package in dir.
func userBase(t *testing.T, dir string) string {
	t.Helper()
	base := t.TempDir()
	out, err := exec.Command(systemPython, "-c", "import sys; print('python%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(base, "lib", strings.TrimSpace(string(out)), "site-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "ray"), filepath.Join(site, "ray")); err != nil {
		t.Fatal(err)
	}
	return base
}

func TestPythonArgv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	torchrun := write("torchrun", "#!/usr/bin/python3\nimport sys\n")
	envPython := write("train", "#!/usr/bin/env -S python3 -u\n")
	shell := write("run.sh", "#!/bin/sh\npython3 train.py\n")
	binary := write("tool", "\x7fELF\x02\x01")
	cases := map[string]struct {
		path string
		want []string
	}{
		"a Python interpreter":      {path: "/opt/venv/bin/python3.11", want: []string{"/opt/venv/bin/python3.11"}},
		"a script run by Python":    {path: torchrun, want: []string{"/usr/bin/python3"}},
		"a script run by env":       {path: envPython, want: []string{"/usr/bin/env", "-S", "python3", "-u"}},
		"a shell script":            {path: shell},
		"a program that is no text": {path: binary},
		"a program that is missing": {path: filepath.Join(dir, "missing")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, pythonArgv(c.path)); diff != "" {
				t.Errorf("pythonArgv(%s) (-want +got):\n%s", c.path, diff)
			}
		})
	}
}

func TestShellPythonArgv(t *testing.T) {
	dir := t.TempDir()
	torchrun := filepath.Join(dir, "torchrun")
	if err := os.WriteFile(torchrun, []byte("#!/usr/bin/python3\nimport sys\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		command []string
		want    []string
	}{
		"python on the PATH":         {command: []string{"/bin/sh", "-c", "python3 train.py"}, want: []string{systemPython}},
		"after assignments and exec": {command: []string{"bash", "-c", "A=1 B=2 exec python3 -u train.py"}, want: []string{systemPython}},
		"a Python script by path":    {command: []string{"sh", "-c", torchrun + " train.py"}, want: []string{"/usr/bin/python3"}},
		"not Python":                 {command: []string{"sh", "-c", "echo hi; python3 x.py"}},
		"a program that is missing":  {command: []string{"sh", "-c", "no-such-program x"}},
		"a shell script file":        {command: []string{"sh", "run.sh"}},
		"not a shell":                {command: []string{"env", "-c", "python3"}},
		"an empty string":            {command: []string{"sh", "-c", ""}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: c.command, WorkingDir: dir,
				Env: []v1.EnvVar{{Name: "PATH", Value: "/usr/bin:/bin"}}}}
			if diff := cmp.Diff(c.want, shellPythonArgv(job, c.command[0])); diff != "" {
				t.Errorf("shellPythonArgv(%q) (-want +got):\n%s", c.command, diff)
			}
		})
	}
}

// Every entrypoint form Ray's jobs use finds ray: where the launcher cannot tell which
// Python the command runs (a shell command line, bash -c, a wrapper script), the workers
// get Trainyard's ray, which imports a real Ray in its place where the Python that
// imports it has one, unless TRAINYARD_RAY=trainyard.
func TestRayCompatForEveryEntrypoint(t *testing.T) {
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s", systemPython)
	}
	compat, err := filepath.Abs(filepath.Join("..", "..", "python", "compat"))
	if err != nil {
		t.Fatal(err)
	}
	const show = `python3 -P -c "import ray; print('ray is', getattr(ray, 'WHO', None) or ray.__version__)"`
	cases := map[string]struct {
		command        []string
		inSitePackages bool // a real Ray in the user's site-packages
		inWorkdir      bool // a ray/ someone planted in the working folder
		env            []v1.EnvVar
		want           string
	}{
		"cd && python":          {command: []string{"/bin/sh", "-c", "cd sub && " + show}, want: "2.40.0+trainyard"},
		"bash -c":               {command: []string{"/bin/bash", "-c", "bash -c " + shellQuote(show)}, want: "2.40.0+trainyard"},
		"a wrapper script":      {command: []string{"./run.sh"}, want: "2.40.0+trainyard"},
		"a real Ray, cd":        {command: []string{"/bin/sh", "-c", "cd sub && " + show}, inSitePackages: true, want: "user"},
		"a real Ray, a wrapper": {command: []string{"./run.sh"}, inSitePackages: true, want: "user"},
		"a real Ray, TRAINYARD_RAY=trainyard": {command: []string{"./run.sh"}, inSitePackages: true,
			env: []v1.EnvVar{{Name: "TRAINYARD_RAY", Value: "trainyard"}}, want: "2.40.0+trainyard"},
		// The package never takes a ray/ of the working folder for a real Ray.
		"a planted ray/, cd && python -P": {command: []string{"/bin/sh", "-c", "cd sub && " + show}, inWorkdir: true, want: "2.40.0+trainyard"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("PYTHONPATH", "")
			b := makeJob(t, "")
			job := b.job
			dir := job.Spec.WorkingDir
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\nexec "+show+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			job.Spec.Command, job.Spec.Env = c.command, c.env
			user := fakeRay(t, "user")
			if c.inSitePackages {
				t.Setenv("PYTHONUSERBASE", userBase(t, user))
			}
			if c.inWorkdir {
				for _, d := range []string{dir, filepath.Join(dir, "sub")} {
					planted := fakeRay(t, "planted")
					if err := os.Rename(filepath.Join(planted, "ray"), filepath.Join(d, "ray")); err != nil {
						t.Fatal(err)
					}
				}
			}
			b.obj(t)
			h := newHarness(t, job)
			h.l.ExtraEnv = map[string]string{"PYTHONPATH": t.TempDir()} // the trainyard helper's folder
			h.l.RayCompat = compat
			res, _ := h.run(t, context.Background())
			if res.Outcome != Succeeded || !strings.Contains(h.out.String(), "ray is "+c.want) {
				t.Errorf("outcome %s, want ray is %s; output:\n%s", res.Outcome, c.want, h.out)
			}
		})
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
