package python

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// verify checks the installed copy at root: every folder in it, root included, is private
// (checkPrivate) and holds exactly the embedded files and folders that belong there,
// plus, beside modules, at most a private __pycache__ of their compiled files; every
// file is private, regular and equal to the embedded one.
func verify(root string, names []string) error {
	return verifyDir(root, ".", embeddedTree(names))
}

// tree lists, for each embedded folder (slash-separated, "." the top), its entries: the
// name of each file and folder, true for a folder.
type tree map[string]map[string]bool

// embeddedTree returns the tree of the embedded files names.
func embeddedTree(names []string) tree {
	t := tree{".": {}}
	for _, name := range names {
		isDir := false
		for p := name; p != "."; p, isDir = path.Dir(p), true {
			parent := path.Dir(p)
			if t[parent] == nil {
				t[parent] = map[string]bool{}
			}
			t[parent][path.Base(p)] = isDir
		}
	}
	return t
}

// verifyDir checks the installed folder p, which is the embedded folder rel, and what it
// holds.
func verifyDir(p, rel string, t tree) error {
	if err := checkPrivateDir(p); err != nil {
		return err
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	want := t[rel]
	found := 0
	for _, e := range entries {
		child := filepath.Join(p, e.Name())
		childRel := path.Join(rel, e.Name())
		isDir, embedded := want[e.Name()]
		switch {
		case e.Name() == "__pycache__" && hasModules(want):
			err = verifyPycache(child, want)
		case embedded && isDir:
			found++
			err = verifyDir(child, childRel, t)
		case embedded:
			found++
			err = verifyFile(child, childRel)
		default:
			err = fmt.Errorf("%s is not part of the trainyard package", child)
		}
		if err != nil {
			return err
		}
	}
	if found != len(want) {
		return fmt.Errorf("%s lacks %d file(s) or folder(s) of the trainyard package", p, len(want)-found)
	}
	return nil
}

// hasModules reports whether the entries of a folder include a Python module.
func hasModules(entries map[string]bool) bool {
	for name, isDir := range entries {
		if !isDir && strings.HasSuffix(name, ".py") {
			return true
		}
	}
	return false
}

// verifyFile checks that the file at p is private, regular and equal to the embedded
// file name (its path in Files).
func verifyFile(p, name string) error {
	if err := checkPrivateFile(p); err != nil {
		return err
	}
	want, err := Files.ReadFile(name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	got, err := io.ReadAll(io.LimitReader(f, int64(len(want))+1))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s differs from the embedded file", p)
	}
	return nil
}

// verifyPycache checks the __pycache__ folder that Python writes beside the modules of a
// folder whose entries are siblings: a private folder holding only private compiled
// files of those modules (and Python's temporary files while it writes one).
func verifyPycache(dir string, siblings map[string]bool) error {
	if err := checkPrivateDir(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !compiledModule(e.Name(), siblings) {
			return fmt.Errorf("%s is not a compiled module of the trainyard package", p)
		}
		if err := checkPrivateFile(p); err != nil {
			return err
		}
	}
	return nil
}

// compiledModule reports whether file is what Python writes in __pycache__ for one of
// the modules among siblings: <module>.<tag>.pyc, or that name and a temporary suffix.
func compiledModule(file string, siblings map[string]bool) bool {
	for name, isDir := range siblings {
		if isDir || !strings.HasSuffix(name, ".py") {
			continue
		}
		module := strings.TrimSuffix(name, ".py")
		if strings.HasPrefix(file, module+".") && strings.Contains(file[len(module):], ".pyc") {
			return true
		}
	}
	return false
}

// checkPrivateDir checks with Lstat that p is a folder that checkPrivate accepts.
func checkPrivateDir(p string) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if err := checkPrivate(p, info); err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a folder", p)
	}
	return nil
}

// checkPrivateFile checks with Lstat that p is a regular file that checkPrivate accepts.
func checkPrivateFile(p string) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if err := checkPrivate(p, info); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	return nil
}

// checkPrivate refuses what info describes (at p) when it is a symbolic link, belongs to
// another user, or its group or others can write it.
func checkPrivate(p string, info fs.FileInfo) error {
	if info.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link", p)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to uid %d", p, st.Uid, os.Geteuid())
	}
	if info.Mode()&0o022 != 0 {
		return fmt.Errorf("%s can be written by its group or others (mode %v)", p, info.Mode().Perm())
	}
	return nil
}

// exchange atomically swaps the folders a and b (both exist).
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
