package python

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const systemPython = "/usr/bin/python3"

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	first, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("Install twice: %s, then %s", first, second)
	}
	if !regexp.MustCompile(`^trainyard-python-[0-9a-f]{12}$`).MatchString(filepath.Base(first)) {
		t.Errorf("Install = %s, want <dir>/trainyard-python-<12 hex digits>", first)
	}
	if filepath.Dir(first) != dir {
		t.Errorf("Install = %s, not in %s", first, dir)
	}

	embedded, err := fs.ReadDir(Files, packageDir)
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.ReadDir(filepath.Join(first, packageDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(installed) != len(embedded) {
		t.Errorf("installed %d files, embedded %d", len(installed), len(embedded))
	}
	for _, e := range embedded {
		want, _ := Files.ReadFile(path.Join(packageDir, e.Name()))
		got, err := os.ReadFile(filepath.Join(first, packageDir, e.Name()))
		if err != nil {
			t.Error(err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("installed %s differs from the embedded one", e.Name())
		}
	}
	if _, err := Files.ReadFile("trainyard/__init__.py"); err != nil {
		t.Errorf("__init__.py is not embedded: %v", err)
	}

	// Only the installed folder is left: no temporary ones.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%s holds %d entries, want 1", dir, len(entries))
	}
}

func TestInstallConcurrently(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	var wg sync.WaitGroup
	paths := make([]string, 8)
	errs := make([]error, 8)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = Install(dir)
		}()
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if paths[i] != paths[0] {
			t.Errorf("concurrent Installs gave %s and %s", paths[0], paths[i])
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%s holds %d entries, want 1", dir, len(entries))
	}
}

// pythonEnv returns the environment for the system Python with the package at root on
// its path and none of the launcher's variables set.
func pythonEnv(root string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "TRAINYARD_"), name == "PYTHONPATH", name == "RANK",
			name == "LOCAL_RANK", name == "WORLD_SIZE", name == "LOCAL_WORLD_SIZE",
			name == "GROUP_RANK", name == "MASTER_ADDR", name == "MASTER_PORT":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PYTHONPATH="+root, "PYTHONDONTWRITEBYTECODE=1")
}

func TestInstalledPackageImports(t *testing.T) {
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s", systemPython)
	}
	root, err := Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemPython, "-c", "import trainyard; print(trainyard.get_context())")
	cmd.Env = pythonEnv(root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "Context(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0, " +
		"run_name=None, storage_path=None, run_dir=None, attempt=1)\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// TestPythonUnitTests runs python/tests with the system Python (torch tests included
// when it has torch).
func TestPythonUnitTests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s", systemPython)
	}
	cmd := exec.Command(systemPython, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	cmd.Env = pythonEnv(".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
