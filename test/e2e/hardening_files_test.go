package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	pyhelper "github.com/trainyard/trainyard/python"
)

// plantHelper writes, as user 12345, a copy of the trainyard package into root with a
// sitecustomize.py that creates marker when Python starts with root on its path.
func plantHelper(t *testing.T, root, marker string) {
	t.Helper()
	pkg := filepath.Join(root, "trainyard")
	if err := os.MkdirAll(pkg, 0o777); err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(pyhelper.Files, "trainyard")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, _ := pyhelper.Files.ReadFile(path.Join("trainyard", e.Name()))
		writeFile(t, filepath.Join(pkg, e.Name()), string(data))
	}
	writeFile(t, filepath.Join(root, "sitecustomize.py"), "open("+pyString(marker)+", 'w').write('planted code ran')\n")
	err = filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, 12345, 12345)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pyString quotes s for Python source.
func pyString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// A helper folder planted by another user where Trainyard installed it before (the
// temporary folder), or in the user's cache, is never put on the workers' path, and the
// run folder trainyard makes is private.
func TestPlantedHelperFolderIsNotUsed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting files as another user needs root")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	version, err := pyhelper.Version()
	if err != nil {
		t.Fatal(err)
	}
	dir, tmp, cache := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "cache")
	marker := filepath.Join(dir, "planted-code-ran")
	old := filepath.Join(tmp, "trainyard-python-"+version)
	plantHelper(t, old, marker)
	cached := filepath.Join(cache, "trainyard", "python-"+version)
	plantHelper(t, cached, marker)
	if err := os.Lchown(filepath.Join(cache, "trainyard"), 12345, 12345); err != nil {
		t.Fatal(err)
	}

	storage := filepath.Join(dir, "results")
	env := []string{"TMPDIR=" + tmp, "XDG_CACHE_HOME=" + cache}
	code, out := run(t, dir, env, "run", "--storage-path", storage, "--name", "paths", "--",
		"python3", "-c", "import sys, trainyard; print('PATH', sys.path); print('HELPER', trainyard.__file__)")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "HELPER ") {
		t.Fatalf("the worker printed no helper path:\n%s", out)
	}
	for _, planted := range []string{old, cached} {
		if strings.Contains(out, planted) {
			t.Errorf("the planted %s is on the worker's path:\n%s", planted, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the planted sitecustomize.py ran in the worker")
	}

	// The run folder and what trainyard wrote in it are private.
	runDir := filepath.Join(storage, "paths")
	for p, want := range map[string]fs.FileMode{storage: 0o700, runDir: 0o700,
		filepath.Join(runDir, "job.yaml"): 0o600, filepath.Join(runDir, "run.json"): 0o600,
		filepath.Join(runDir, "logs", "attempt-1"): 0o700, filepath.Join(runDir, "logs", "attempt-1", "rank-0.log"): 0o600} {
		if info, err := os.Lstat(p); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, info.Mode().Perm(), err, want)
		}
	}
}
