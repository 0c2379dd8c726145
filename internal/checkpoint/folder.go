package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/trainyard/trainyard/internal/durable"
)

// ErrNotOwned is returned (wrapped) for a checkpoint, or a file in one, that belongs to
// another user than the one this process runs as: it may have been planted, and loading
// a checkpoint (torch.load unpickles) runs what is in it as the job's user.
var ErrNotOwned = errors.New("not owned by this user")

// dir is an open folder. Everything in it is reached through root, which never leaves
// it, and the folder itself through f (fsync, fstat, renameat2): once opened, neither
// is looked up by its path again, so a folder moved or replaced meanwhile changes
// nothing of what they reach.
type dir struct {
	root *os.Root
	f    *os.File
	path string // where it was when opened, for messages
}

// newDir wraps the opened root at path.
func newDir(root *os.Root, path string) (*dir, error) {
	f, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	return &dir{root: root, f: f, path: path}, nil
}

// openDirPath opens the folder at path (following links on the way, as a path does).
func openDirPath(path string) (*dir, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return newDir(root, path)
}

// openIn opens the folder name in d, refusing a symbolic link (even one inside d), and
// returns it with what Lstat said of it before it was opened.
func (d *dir) openIn(name string) (*dir, fs.FileInfo, error) {
	info, err := d.root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, info, fmt.Errorf("%s is a symbolic link", name)
	case !info.IsDir():
		return nil, info, fmt.Errorf("%s is not a folder", name)
	}
	root, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, info, err
	}
	sub, err := newDir(root, filepath.Join(d.path, name))
	if err != nil {
		return nil, info, err
	}
	if opened, err := sub.f.Stat(); err != nil || !os.SameFile(info, opened) {
		sub.Close()
		return nil, info, fmt.Errorf("%s was replaced while it was being opened", name)
	}
	return sub, info, nil
}

// Close closes the folder.
func (d *dir) Close() error {
	return errors.Join(d.f.Close(), d.root.Close())
}

// list returns the entries of the folder, read anew.
func (d *dir) list() ([]fs.DirEntry, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// sync makes the folder's entries durable.
func (d *dir) sync() error { return d.f.Sync() }

// syncIn syncs the file or folder rel (slash-separated) inside d.
func (d *dir) syncIn(rel string) error {
	f, err := d.root.Open(filepath.FromSlash(rel))
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// device returns the ID of the filesystem that holds the folder.
func (d *dir) device() (uint64, error) {
	info, err := d.f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Sys().(*syscall.Stat_t).Dev, nil
}

// real returns where the folder is now, with no symbolic links: what the kernel says of
// the open descriptor, or (without /proc) its path with links resolved.
func (d *dir) real() (string, error) {
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(d.f.Fd()))); err == nil && filepath.IsAbs(p) {
		return p, nil
	}
	return filepath.EvalSymlinks(d.path)
}

// rename renames oldname in from to newname in to, never over an existing one.
func rename(from *dir, oldname string, to *dir, newname string) error {
	return durable.RenameNoReplaceAt(from.f, oldname, to.f, newname)
}

// checkOwner refuses what info describes unless it belongs to the current user.
func checkOwner(what string, info fs.FileInfo) error {
	return ownerError(what, uidOf(info))
}

// uidOf returns the owner of what info describes, or -1.
func uidOf(info fs.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// ownerError returns an error wrapping ErrNotOwned when uid is known and not the current
// user's.
func ownerError(what string, uid int) error {
	if uid < 0 || uid == os.Geteuid() {
		return nil
	}
	return fmt.Errorf("%s belongs to %s, not to you, %s (%w): no run of yours committed it, so it is not used; "+
		"remove it if you do not know where it came from", what, userName(uid), userName(os.Geteuid()), ErrNotOwned)
}

// userName returns "alice (uid 1001)", or "uid 1001" when the name is unknown.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
