package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// ErrReplaced is returned (wrapped) by CheckSame when the run folder's path no longer
// leads to the folder Open opened.
var ErrReplaced = errors.New("run folder replaced")

// IDEnv is the variable that gives a run's processes the ID of its folder (see ID), so
// that the in-job helper can check the folder is still the run's before it hands out a
// checkpoint to resume from or a folder to write one into.
const IDEnv = "TRAINYARD_RUN_DIR_ID"

// ID returns the device and inode of the folder Open opened, as "device:inode" in
// decimal (Python's os.stat st_dev and st_ino).
func (r *Run) ID() string {
	st, ok := r.opened.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// CheckSame checks that the run folder's path, Dir, still leads to the folder Open
// opened (the same device and inode, and not through a symbolic link). Everything the
// run writes goes through the opened folder, but whoever reads the path (the training
// script, a resume) would otherwise get what someone put in its place: a run checks it
// before every attempt and fails (ErrReplaced) rather than resume from it.
func (r *Run) CheckSame() error {
	info, err := os.Lstat(r.Dir)
	if err == nil && os.SameFile(info, r.opened) {
		return nil
	}
	now := "it is gone"
	switch {
	case err == nil && info.Mode()&fs.ModeSymlink != 0:
		now = "it is now a symbolic link"
	case err == nil:
		now = "it is now another folder"
		if uid, ok := owner(info); ok && uid != os.Geteuid() {
			now += " of " + userName(uid)
		}
	case !errors.Is(err, fs.ErrNotExist):
		now = err.Error()
	}
	return fmt.Errorf("run folder %s was replaced while the run ran (%w: %s, not the folder with device:inode %s "+
		"that the run opened); refusing to resume from what is there now. Someone who may write in the storage "+
		"path moved it: find out who, and put the run's folder back before running it again", r.Dir, ErrReplaced, now, r.ID())
}

// OpenRoot opens the run folder again, as an os.Root of its own that the caller closes:
// it reaches the folder Open opened, wherever it is now, and nothing outside it.
func (r *Run) OpenRoot() (*os.Root, error) {
	root, err := r.root.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("open run folder %s: %w", r.Dir, err)
	}
	return root, nil
}

// Pinned returns a path that leads to the folder Open opened wherever it is now, for code
// that only takes paths (a git clone): /proc/self/fd/N of a descriptor of the folder,
// valid until done is called. Without /proc it returns Dir, once CheckSame passes.
func (r *Run) Pinned() (path string, done func(), err error) {
	f, err := r.root.Open(".")
	if err != nil {
		return "", nil, fmt.Errorf("open run folder %s: %w", r.Dir, err)
	}
	path = "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if info, err := os.Stat(path); err == nil && os.SameFile(info, r.opened) {
		return path, func() { f.Close() }, nil
	}
	f.Close()
	if err := r.CheckSame(); err != nil {
		return "", nil, err
	}
	return r.Dir, func() {}, nil
}
