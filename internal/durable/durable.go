// Package durable makes file-system changes that survive a crash: syncing a file or a
// folder's entries, renaming without ever replacing what is at the target, and writing a
// file atomically (a reader sees the old content or the new, never a part).
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Sync opens a file or folder read-only and syncs it: for a folder, its entries (a file
// created, renamed or removed in it) become durable.
func Sync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RenameNoReplace renames oldpath to newpath, failing with EEXIST if newpath exists (a
// plain rename would silently replace an empty folder there). Where the filesystem cannot
// do that atomically, it checks, then renames.
func RenameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		if _, serr := os.Lstat(newpath); serr == nil {
			err = unix.EEXIST
		} else {
			return os.Rename(oldpath, newpath)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// RenameNoReplaceAt is RenameNoReplace between open folders: it renames oldname in
// olddir to newname in newdir (renameat2), so that neither folder is looked up again by
// its path, and a folder that was moved or replaced meanwhile is not renamed into or out
// of. The names are looked up in their folders as renameat2 does: pass single names.
func RenameNoReplaceAt(olddir *os.File, oldname string, newdir *os.File, newname string) error {
	from, to := int(olddir.Fd()), int(newdir.Fd())
	err := unix.Renameat2(from, oldname, to, newname, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		var st unix.Stat_t
		if serr := unix.Fstatat(to, newname, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
			err = unix.EEXIST
		} else {
			err = unix.Renameat(from, oldname, to, newname)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(olddir.Name(), oldname),
			New: filepath.Join(newdir.Name(), newname), Err: err}
	}
	return nil
}

// WriteFile writes data to a temporary file beside path, syncs it, gives it perm and
// renames it over path, then syncs the folder.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	name := filepath.Base(path)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := Sync(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write %s: sync folder: %w", name, err)
	}
	return nil
}
