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

// verify checks the installed copy at root: root and root/trainyard/ are private folders
// (checkPrivate), root holds only trainyard/, and trainyard/ holds exactly the embedded
// files, each private, regular and equal to the embedded one, plus at most a private
// __pycache__ of the package's modules.
func verify(root string, names []string) error {
	if err := checkPrivateDir(root); err != nil {
		return err
	}
	if err := onlyEntry(root, packageDir); err != nil {
		return err
	}
	pkg := filepath.Join(root, packageDir)
	if err := checkPrivateDir(pkg); err != nil {
		return err
	}
	entries, err := os.ReadDir(pkg)
	if err != nil {
		return err
	}
	embedded := map[string]bool{}
	for _, name := range names {
		embedded[name] = true
	}
	found := 0
	for _, e := range entries {
		p := filepath.Join(pkg, e.Name())
		switch {
		case e.Name() == "__pycache__":
			err = verifyPycache(p, names)
		case embedded[e.Name()]:
			found++
			err = verifyFile(p, e.Name())
		default:
			err = fmt.Errorf("%s is not part of the trainyard package", p)
		}
		if err != nil {
			return err
		}
	}
	if found != len(names) {
		return fmt.Errorf("%s lacks %d file(s) of the trainyard package", pkg, len(names)-found)
	}
	return nil
}

// onlyEntry checks that the folder dir holds name and nothing else.
func onlyEntry(dir, name string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != name {
			return fmt.Errorf("%s is not part of the trainyard package", filepath.Join(dir, e.Name()))
		}
	}
	if len(entries) == 0 {
		return fmt.Errorf("%s is empty", dir)
	}
	return nil
}

// verifyFile checks that the file at p is private, regular and equal to the embedded
// file name.
func verifyFile(p, name string) error {
	if err := checkPrivateFile(p); err != nil {
		return err
	}
	want, err := Files.ReadFile(path.Join(packageDir, name))
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

// verifyPycache checks the __pycache__ folder that Python writes beside the modules: a
// private folder holding only private compiled files of the package's modules (and
// Python's temporary files while it writes one).
func verifyPycache(dir string, names []string) error {
	if err := checkPrivateDir(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !compiledModule(e.Name(), names) {
			return fmt.Errorf("%s is not a compiled module of the trainyard package", p)
		}
		if err := checkPrivateFile(p); err != nil {
			return err
		}
	}
	return nil
}

// compiledModule reports whether file is what Python writes in __pycache__ for one of
// the modules names: <module>.<tag>.pyc, or that name and a temporary suffix.
func compiledModule(file string, names []string) bool {
	for _, name := range names {
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
