package python

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const systemPython = "/usr/bin/python3"

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	first, cleanup, err := Install(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cleanup() // the cache stays
	second, _, err := Install(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("Install twice: %s, then %s", first, second)
	}
	if !regexp.MustCompile(`^python-[0-9a-f]{12}$`).MatchString(filepath.Base(first)) {
		t.Errorf("Install = %s, want <dir>/trainyard/python-<12 hex digits>", first)
	}
	if filepath.Dir(first) != filepath.Join(dir, "trainyard") {
		t.Errorf("Install = %s, not in %s/trainyard", first, dir)
	}
	if err := verify(first, embeddedNames(t)); err != nil {
		t.Errorf("the installed copy: %v", err)
	}
	if _, err := Files.ReadFile("trainyard/__init__.py"); err != nil {
		t.Errorf("__init__.py is not embedded: %v", err)
	}
	wantModes := map[string]fs.FileMode{"trainyard": 0o700, filepath.Base(first): 0o700, "__init__.py": 0o600, // trainyard: the top folder and the package
		"compat": 0o700, "ray": 0o700, "train": 0o700, "torch": 0o700, "_trainer.py": 0o600}
	torch := filepath.Join(CompatDir(first), "ray", "train", "torch")
	for _, p := range []string{filepath.Dir(first), first, filepath.Join(first, packageDir), filepath.Join(first, packageDir, "__init__.py"),
		CompatDir(first), filepath.Dir(filepath.Dir(torch)), filepath.Dir(torch), torch, filepath.Join(torch, "_trainer.py")} {
		info, err := os.Lstat(p)
		if err != nil || info.Mode().Perm() != wantModes[filepath.Base(p)] {
			t.Errorf("%s: mode %v (%v), want %v", p, info.Mode(), err, wantModes[filepath.Base(p)])
		}
	}
	// Only the installed folder is left: no temporary ones.
	assertOnly(t, filepath.Join(dir, "trainyard"), filepath.Base(first))
}

// embeddedNames returns the names of the embedded package's files.
func embeddedNames(t *testing.T) []string {
	t.Helper()
	names, _, err := contents()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// assertOnly fails the test unless dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

func TestInstallConcurrently(t *testing.T) {
	dir := t.TempDir()
	for _, round := range []string{"new", "replacing a modified copy"} {
		if round != "new" {
			path, _, _ := Install(Options{Dir: dir})
			appendTo(t, filepath.Join(path, packageDir, "__init__.py"), "\nimport os\n")
		}
		var wg sync.WaitGroup
		paths := make([]string, 8)
		errs := make([]error, 8)
		for i := range paths {
			wg.Add(1)
			go func() {
				defer wg.Done()
				paths[i], _, errs[i] = Install(Options{Dir: dir})
			}()
		}
		wg.Wait()
		for i := range paths {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if paths[i] != paths[0] {
				t.Errorf("%s: concurrent Installs gave %s and %s", round, paths[0], paths[i])
			}
		}
		if err := verify(paths[0], embeddedNames(t)); err != nil {
			t.Errorf("%s: %v", round, err)
		}
		assertOnly(t, filepath.Join(dir, "trainyard"), filepath.Base(paths[0]))
	}
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
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
	root, cleanup, err := Install(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cmd := exec.Command(systemPython, "-c", "import trainyard; print(trainyard.get_context())")
	cmd.Dir = t.TempDir() // not python/, which holds the sources
	cmd.Env = pythonEnv(root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "Context(rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0, " +
		"run_name=None, storage_path=None, run_dir=None, attempt=1, min_workers=None, max_workers=None, previous_world_size=None)\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// TestPythonUnitTests runs python/tests with the system Python (torch tests included
// when it has torch), with trainyard and the ray compatibility package importable.
func TestPythonUnitTests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s", systemPython)
	}
	cmd := exec.Command(systemPython, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	cmd.Env = pythonEnv(".:" + compatDir) // the ray package's tests import it from compat/
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
