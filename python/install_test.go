package python

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID owns what a test plants as "another user".
const otherUID = 12345

// needRoot skips a test that chowns files to another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
}

// plantCopy writes the embedded package into root/trainyard/ as an attacker would,
// with a sitecustomize.py beside it, and returns root.
func plantCopy(t *testing.T, root string) string {
	t.Helper()
	if err := os.MkdirAll(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := write(root, embeddedNames(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sitecustomize.py"), []byte("print('owned')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// chownAll gives everything under root to otherUID.
func chownAll(t *testing.T, root string) {
	t.Helper()
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, otherUID, otherUID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// assertTrusted fails the test unless root is a verified copy of the package, with no
// planted file in it.
func assertTrusted(t *testing.T, root string) {
	t.Helper()
	if err := verify(root, embeddedNames(t)); err != nil {
		t.Errorf("Install returned an untrusted copy: %v", err)
	}
	_ = filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err == nil && (strings.HasSuffix(p, "sitecustomize.py") || strings.HasSuffix(p, ".pth") || strings.HasSuffix(p, "evil.py")) {
			t.Errorf("planted %s is in the returned copy", p)
		}
		return nil
	})
}

// The old code installed to <temp>/trainyard-python-<version> and used what it found
// there; a copy planted there, or in the cache by another user, is never used.
func TestInstallIgnoresPlantedFolders(t *testing.T) {
	needRoot(t)
	tmp, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_CACHE_HOME", cache)
	_, version, _ := contents()
	old := plantCopy(t, filepath.Join(tmp, "trainyard-python-"+version))
	chownAll(t, old)
	planted := plantCopy(t, filepath.Join(cache, "trainyard", "python-"+version))
	chownAll(t, planted)
	os.Chown(filepath.Join(cache, "trainyard"), os.Geteuid(), os.Getegid()) // the top folder is ours
	os.Chmod(filepath.Join(cache, "trainyard"), 0o700)

	var log bytes.Buffer
	got, cleanup, err := Install(Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if got == old {
		t.Fatalf("Install returned the planted %s", old)
	}
	if got != planted {
		t.Errorf("Install = %s, want the cache's %s (replaced)", got, planted)
	}
	assertTrusted(t, got)
	if !strings.Contains(log.String(), "belongs to uid 12345") {
		t.Errorf("no warning saying why the cached copy was replaced:\n%s", log.String())
	}
}

// A cached copy that fails verification is replaced by a fresh one.
func TestInstallReplacesBadCopy(t *testing.T) {
	cases := map[string]struct {
		root  bool // needs root (chown)
		spoil func(t *testing.T, root string)
	}{
		"modified file": {spoil: func(t *testing.T, root string) {
			appendTo(t, filepath.Join(root, packageDir, "__init__.py"), "\nimport os\n")
		}},
		"file missing": {spoil: func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, packageDir, "_report.py"))
		}},
		"sitecustomize.py beside the package": {spoil: func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "sitecustomize.py"), nil, 0o600)
		}},
		"a .pth file": {spoil: func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "x.pth"), nil, 0o600)
		}},
		"extra module in the package": {spoil: func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, packageDir, "evil.py"), nil, 0o600)
		}},
		"extra file in __pycache__": {spoil: func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, packageDir, "__pycache__"), 0o700)
			os.WriteFile(filepath.Join(root, packageDir, "__pycache__", "evil.py"), nil, 0o600)
		}},
		"group-writable package folder": {spoil: func(t *testing.T, root string) {
			os.Chmod(filepath.Join(root, packageDir), 0o770)
		}},
		"group-writable file": {spoil: func(t *testing.T, root string) {
			os.Chmod(filepath.Join(root, packageDir, "__init__.py"), 0o620)
		}},
		"file a symbolic link": {spoil: func(t *testing.T, root string) {
			p := filepath.Join(root, packageDir, "__init__.py")
			elsewhere := filepath.Join(t.TempDir(), "__init__.py")
			data, _ := os.ReadFile(p)
			os.WriteFile(elsewhere, data, 0o600)
			os.Remove(p)
			os.Symlink(elsewhere, p)
		}},
		"folder a symbolic link": {spoil: func(t *testing.T, root string) {
			elsewhere := plantCopy(t, filepath.Join(t.TempDir(), "copy"))
			os.Remove(filepath.Join(elsewhere, "sitecustomize.py"))
			os.RemoveAll(root)
			os.Symlink(elsewhere, root)
		}},
		"nested file modified": {spoil: func(t *testing.T, root string) {
			appendTo(t, filepath.Join(root, compatDir, "ray", "train", "torch", "_trainer.py"), "\nimport os\n")
		}},
		"nested file missing": {spoil: func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, compatDir, "ray", "train", "_session.py"))
		}},
		"nested folder missing": {spoil: func(t *testing.T, root string) {
			os.RemoveAll(filepath.Join(root, compatDir, "ray", "train", "torch"))
		}},
		"extra module in a nested package": {spoil: func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, compatDir, "ray", "train", "evil.py"), nil, 0o600)
		}},
		"extra package beside ray": {spoil: func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, compatDir, "torch"), 0o700)
			os.WriteFile(filepath.Join(root, compatDir, "torch", "__init__.py"), nil, 0o600)
		}},
		"__pycache__ where no module is": {spoil: func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, compatDir, "__pycache__"), 0o700)
		}},
		"compiled file of another folder's module": {spoil: func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, compatDir, "ray", "train", "torch", "__pycache__"), 0o700)
			os.WriteFile(filepath.Join(root, compatDir, "ray", "train", "torch", "__pycache__", "_session.cpython-311.pyc"), nil, 0o600)
		}},
		"group-writable nested folder": {spoil: func(t *testing.T, root string) {
			os.Chmod(filepath.Join(root, compatDir, "ray", "train"), 0o770)
		}},
		"nested folder a symbolic link": {spoil: func(t *testing.T, root string) {
			p := filepath.Join(root, compatDir, "ray", "train")
			elsewhere := filepath.Join(t.TempDir(), "train")
			os.Rename(p, elsewhere)
			os.Symlink(elsewhere, p)
		}},
		"another user's file": {root: true, spoil: func(t *testing.T, root string) {
			os.Lchown(filepath.Join(root, packageDir, "__init__.py"), otherUID, otherUID)
		}},
		"another user's copy": {root: true, spoil: func(t *testing.T, root string) {
			chownAll(t, root)
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if c.root {
				needRoot(t)
			}
			dir := t.TempDir()
			first, _, err := Install(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			c.spoil(t, first)
			if verify(first, embeddedNames(t)) == nil {
				t.Fatal("the spoiled copy passes verification")
			}
			got, _, err := Install(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if got != first {
				t.Errorf("Install = %s, want the cache's %s (replaced)", got, first)
			}
			if info, err := os.Lstat(got); err != nil || !info.IsDir() {
				t.Errorf("%s after Install: %v (%v), want a folder", got, info.Mode(), err)
			}
			assertTrusted(t, got)
			assertOnly(t, filepath.Join(dir, "trainyard"), filepath.Base(got))
		})
	}
}

// Python's own compiled files do not make Install replace the copy.
func TestInstallKeepsPycache(t *testing.T) {
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("no %s", systemPython)
	}
	dir := t.TempDir()
	root, _, err := Install(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemPython, "-c", "import trainyard, ray.train.torch")
	cmd.Dir = t.TempDir() // not python/, which holds the sources
	for _, kv := range pythonEnv(root + ":" + CompatDir(root)) {
		if !strings.HasPrefix(kv, "PYTHONDONTWRITEBYTECODE=") { // bytecode written
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var before []os.FileInfo
	pycaches := []string{filepath.Join(root, packageDir, "__pycache__"),
		filepath.Join(CompatDir(root), "ray", "train", "torch", "__pycache__")}
	for _, p := range pycaches {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatalf("Python wrote no __pycache__: %v", err)
		}
		before = append(before, info)
	}
	if _, _, err := Install(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for i, p := range pycaches {
		if after, err := os.Stat(p); err != nil || !os.SameFile(before[i], after) {
			t.Errorf("Install replaced a copy with Python's %s in it (%v)", p, err)
		}
	}
}

// When the cache cannot be trusted, Install writes a private copy for this process into
// a new temporary folder, says why, and cleanup removes it.
func TestInstallFallsBackToTemp(t *testing.T) {
	cases := map[string]struct {
		root  bool
		setup func(t *testing.T, cache string) // cache: $XDG_CACHE_HOME
		why   string
	}{
		"no home folder": {setup: func(t *testing.T, cache string) {
			t.Setenv("XDG_CACHE_HOME", "")
			t.Setenv("HOME", "")
		}, why: "no cache folder"},
		"cache writable by others": {setup: func(t *testing.T, cache string) {
			os.MkdirAll(cache, 0o700)
			os.Chmod(cache, 0o777)
		}, why: "can be written by its group or others"},
		"cache a link to another user's folder": {root: true, setup: func(t *testing.T, cache string) {
			target := t.TempDir()
			os.Chown(target, otherUID, otherUID)
			os.Symlink(target, cache)
		}, why: "belongs to uid 12345"},
		"trainyard folder another user's": {root: true, setup: func(t *testing.T, cache string) {
			os.MkdirAll(filepath.Join(cache, "trainyard"), 0o700)
			os.Chown(filepath.Join(cache, "trainyard"), otherUID, otherUID)
		}, why: "belongs to uid 12345"},
		"trainyard folder a link": {setup: func(t *testing.T, cache string) {
			os.MkdirAll(cache, 0o700)
			os.Symlink(t.TempDir(), filepath.Join(cache, "trainyard"))
		}, why: "is a symbolic link"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if c.root {
				needRoot(t)
			}
			tmp, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
			t.Setenv("TMPDIR", tmp)
			t.Setenv("XDG_CACHE_HOME", cache)
			c.setup(t, cache)
			var log bytes.Buffer
			got, cleanup, err := Install(Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Dir(got) != tmp || !strings.HasPrefix(filepath.Base(got), "trainyard-python-") {
				t.Errorf("Install = %s, want a new folder in %s", got, tmp)
			}
			if info, err := os.Lstat(got); err != nil || info.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v (%v), want 0700", got, info.Mode(), err)
			}
			assertTrusted(t, got)
			if !strings.Contains(log.String(), c.why) {
				t.Errorf("the warning does not say %q:\n%s", c.why, log.String())
			}
			cleanup()
			if _, err := os.Lstat(got); !os.IsNotExist(err) {
				t.Errorf("cleanup left %s (%v)", got, err)
			}
		})
	}
}
