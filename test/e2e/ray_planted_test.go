package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// plantedWorker is a worker's line of testdata/ray_shared_folder.py.
var plantedWorker = regexp.MustCompile(`WORKER rank=(\d) sibling=7 ray=(\S+) trainyard=(\S+)`)

// A Ray Train driver runs in a shared, sticky working folder (a project folder that a
// group writes to). After it started, someone else creates ray/ and trainyard/ packages
// there. The gang that the driver's fit() launches imports Trainyard's packages, never
// the planted ones, and its loop still imports the module beside the script.
func TestRayGangIgnoresPackagesPlantedInTheWorkingFolder(t *testing.T) {
	needPlainTorch(t)
	shared := sharedFolder(t)
	script := filepath.Join(shared, "train.py")
	copyFile(t, filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_shared_folder.py"), script)
	writeFile(t, filepath.Join(shared, "sibling.py"), "VALUE = 7\n")
	marker := filepath.Join(t.TempDir(), "planted-code-ran")
	goFile := filepath.Join(t.TempDir(), "go")
	storage := t.TempDir()

	ty := start(t, shared, []string{"PYTHONPATH=", "PYTHONUSERBASE=" + t.TempDir()},
		"run", "--storage-path", storage, "--name", "driver", "--", python, script, goFile)
	ty.out.waitFor(t, "DRIVER started", 2*time.Minute)
	for _, pkg := range []string{"ray", "trainyard"} {
		plant(t, filepath.Join(shared, pkg, "__init__.py"),
			fmt.Sprintf("open(%q, 'a').write(%q)\n", marker, pkg+" ran as the job's user\n"))
	}
	writeFile(t, goFile, "")
	code := ty.wait(t)
	out := ty.out.String()

	if data, err := os.ReadFile(marker); err == nil {
		t.Errorf("a package planted in the working folder ran in the gang: %s\n%s", data, out)
	}
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	workers := plantedWorker.FindAllStringSubmatch(out, -1)
	if len(workers) != 2 {
		t.Fatalf("WORKER lines %v, want one from each of 2 ranks that imported sibling.py:\n%s", workers, out)
	}
	for _, w := range workers {
		for _, file := range w[2:] {
			if strings.HasPrefix(file, shared+string(filepath.Separator)) {
				t.Errorf("rank %s imported %s, from the shared working folder", w[1], file)
			}
		}
	}
	if rec := readRecord(t, filepath.Join(storage, "gang")); rec.Phase != "Succeeded" {
		t.Errorf("the gang's run: phase %s, want Succeeded", rec.Phase)
	}
}

// sharedFolder makes a folder that everyone may create entries in, sticky as /tmp is:
// others cannot remove or replace what is there, but can add new names.
func sharedFolder(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "trainyard-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plant writes text to path, making its folder, as another user of a shared folder may.
func plant(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the file src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(data))
}
