package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// needPlainTorch skips a test when the system Python has no PyTorch.
func needPlainTorch(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping real PyTorch training")
	}
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("PyTorch is not installed for %s (%v): `make test` installs python3-torch", python, err)
	}
}

var rayResultLine = regexp.MustCompile(`RESULT rank=(\d) world=2 device=cpu checkpoint=(\S+) epoch=2 saved_epoch=2 path=(\S+) ray=(\S+)`)

// A Ray Train script runs unchanged, without Ray, in a gang of 2: each worker's fit()
// trains with DDP, rank 0's checkpoint of each epoch is committed, and fit() returns the
// latest one.
func TestRayTrainScriptInAGang(t *testing.T) {
	needPlainTorch(t)
	storage := t.TempDir()
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_train.py")
	code, out := run(t, t.TempDir(), []string{"PYTHONPATH=", "PYTHONUSERBASE=" + t.TempDir()},
		"run", "--storage-path", storage, "--name", "ray-train", "--workers", "2", "--", python, script)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	runDir := filepath.Join(storage, "ray-train")
	if rec := readRecord(t, runDir); rec.Phase != "Succeeded" {
		t.Errorf("phase %s, want Succeeded", rec.Phase)
	}
	checkpoints := committedCheckpoints(t, runDir)
	if len(checkpoints) != 3 {
		t.Fatalf("committed checkpoints %v, want one per epoch (3)\n%s", checkpoints, out)
	}
	results := rayResultLine.FindAllStringSubmatch(out, -1)
	var ranks []string
	for _, m := range results {
		ranks = append(ranks, m[1])
		if m[2] != checkpoints[2] || m[3] != runDir || !strings.Contains(m[4], filepath.Join("compat", "ray")) {
			t.Errorf("rank %s: Result checkpoint %s in %s (ray from %s), want the latest %s in %s from Trainyard's compat",
				m[1], m[2], m[3], m[4], checkpoints[2], runDir)
		}
	}
	if slices.Sort(ranks); strings.Join(ranks, ",") != "0,1" {
		t.Errorf("RESULT lines from ranks %v, want 0 and 1:\n%s", ranks, out)
	}
	if strings.Contains(out, "differs from this gang") {
		t.Errorf("a warning about the gang's size, which matches ScalingConfig:\n%s", out)
	}
}

// committedCheckpoints lists the checkpoint_* folders of a run, in order.
func committedCheckpoints(t *testing.T, runDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(runDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "checkpoint_") {
			names = append(names, e.Name())
		}
	}
	return names
}

// A ray the job's Python can import by itself (here a stand-in, on the user's
// PYTHONPATH or in the user's site-packages, which PYTHONPATH would come before) is the
// one the workers import: Trainyard's is not offered.
func TestRayCompatNeverShadowsUsersRay(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s", python)
	}
	script := filepath.Join(t.TempDir(), "which.py")
	if err := os.WriteFile(script, []byte("import ray\nprint('ray is', getattr(ray, 'WHO', 'trainyard'))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		env  func(users string) []string
		want string
	}{
		"no ray":                       {env: func(string) []string { return []string{"PYTHONPATH="} }, want: "trainyard"},
		"ray on the user's PYTHONPATH": {env: func(u string) []string { return []string{"PYTHONPATH=" + u} }, want: "user"},
		"ray in the user's site-packages": {env: func(u string) []string {
			return []string{"PYTHONPATH=", "PYTHONUSERBASE=" + u}
		}, want: "user"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			users := t.TempDir()
			site := filepath.Join(users, "lib", pythonVersion(t), "site-packages")
			for _, dir := range []string{filepath.Join(users, "ray"), filepath.Join(site, "ray")} {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "__init__.py"), []byte("WHO = 'user'\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env := append(c.env(users), "PYTHONNOUSERSITE=")
			code, out := run(t, t.TempDir(), env, "run", "--storage-path", t.TempDir(), "--name", "which", "--", python, script)
			if code != 0 || !strings.Contains(out, "ray is "+c.want) {
				t.Errorf("exit %d, want 0 and ray is %s:\n%s", code, c.want, out)
			}
		})
	}
}

// pythonVersion returns the python<major>.<minor> folder name of site-packages.
func pythonVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(python, "-c", "import sys; print('python%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(strings.TrimSpace(string(out)))
}
