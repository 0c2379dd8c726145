package rundir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrUntrusted is returned (wrapped) when a run folder, or something inside it, is a
// symbolic link or belongs to another user: Trainyard never writes through a link that
// someone else could have planted, nor into a folder another user controls.
var ErrUntrusted = errors.New("not trusted")

// MakeFolder creates the run folder dir, as Open does, and checks it: a run folder that
// exists must be a real folder (not a symbolic link) of the current user. Its storage
// path (dir's parent) is created 0700 when missing; an existing one is left as it is.
// The run folder is created with the modes PermFor gives for the storage path.
//
// The storage path must pass CheckStorage (before anything is created, and again once
// it exists); otherwise MakeFolder fails with ErrUntrustedStorage.
func MakeFolder(dir string) error {
	f, err := makeFolder(dir, nil)
	if err != nil {
		return err
	}
	return f.root.Close()
}

// folder is an opened, checked run folder.
type folder struct {
	root    *os.Root
	opened  fs.FileInfo // the folder as opened: its device and inode
	perm    Perm        // for what is created inside
	created bool        // by this call: no other process made it
}

// makeFolder checks the storage path (see checkStorage), creates dir (os.Mkdir, so that
// exactly one of several racing processes creates it) and opens it.
func makeFolder(dir string, warn func(error)) (folder, error) {
	storage := filepath.Dir(dir)
	warn = once(warn)
	if err := checkStorage(storage, warn); err != nil {
		return folder{}, err
	}
	if _, err := os.Stat(storage); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(storage, 0o700); err != nil {
			return folder{}, fmt.Errorf("create storage path: %w", err)
		}
		if err := checkStorage(storage, warn); err != nil { // what another user made meanwhile
			return folder{}, err
		}
	}
	perm := PermFor(storage)
	err := os.Mkdir(dir, perm.Dir.Perm())
	created := err == nil
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return folder{}, fmt.Errorf("create run folder: %w", err)
	}
	f, err := openFolder(dir)
	if err != nil {
		return folder{}, err
	}
	f.created = created
	if created { // the mode asked for, whatever the umask
		if err := chmodIn(f.root, ".", perm.Dir); err != nil {
			f.root.Close()
			return folder{}, fmt.Errorf("create run folder: %w", err)
		}
		f.perm = perm
	}
	return f, nil
}

// openFolder opens the existing run folder dir once checkFolder trusts it.
func openFolder(dir string) (folder, error) {
	info, err := os.Lstat(dir)
	if err != nil {
		return folder{}, fmt.Errorf("open run folder: %w", err)
	}
	if err := checkFolder(dir, info); err != nil {
		return folder{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return folder{}, fmt.Errorf("open run folder: %w", err)
	}
	opened, err := root.Stat(".")
	if err == nil && !os.SameFile(info, opened) {
		err = fmt.Errorf("%s was replaced while it was being opened; try again", dir)
	}
	if err != nil {
		root.Close()
		return folder{}, fmt.Errorf("open run folder: %w", err)
	}
	return folder{root: root, opened: opened, perm: permOf(opened)}, nil
}

// once returns warn made to pass on only its first call (nil for nil).
func once(warn func(error)) func(error) {
	if warn == nil {
		return nil
	}
	warned := false
	return func(err error) {
		if !warned {
			warned = true
			warn(err)
		}
	}
}

// checkStorage runs CheckStorage; with warn set, a refusal is passed to warn instead.
func checkStorage(storage string, warn func(error)) error {
	err := CheckStorage(storage)
	if err != nil && warn != nil && errors.Is(err, ErrUntrustedStorage) {
		warn(err)
		return nil
	}
	return err
}

// checkFolder refuses a run folder that is a symbolic link, not a folder, or another
// user's.
func checkFolder(dir string, info fs.FileInfo) error {
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("run folder %s is a symbolic link: %w (Trainyard does not follow links in a storage path); "+
			"remove the link, or give --storage-path the folder it points to", dir, ErrUntrusted)
	case !info.IsDir():
		return fmt.Errorf("run folder %s is not a folder; remove it or pick another --name", dir)
	}
	if uid, ok := owner(info); ok && uid != os.Geteuid() {
		return fmt.Errorf("run folder %s belongs to uid %d, not to you (uid %d): %w; "+
			"pick another --name or --storage-path, or have its owner remove it", dir, uid, os.Geteuid(), ErrUntrusted)
	}
	return nil
}

// checkInside refuses something inside a run folder that is a symbolic link or another
// user's.
func checkInside(root *os.Root, name string, info fs.FileInfo) error {
	path := filepath.Join(root.Name(), name)
	if info.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w (Trainyard does not follow links inside a run folder); remove it", path, ErrUntrusted)
	}
	if uid, ok := owner(info); ok && uid != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d): %w; remove it", path, uid, os.Geteuid(), ErrUntrusted)
	}
	return nil
}

// owner returns the uid that owns what info describes.
func owner(info fs.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// chmodIn sets the mode of name in root through an open descriptor (fchmod), so that a
// link put in its place is never followed.
func chmodIn(root *os.Root, name string, mode fs.FileMode) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	err = f.Chmod(mode)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdirIn creates the folder name in root and the folders above it inside root, each
// with mode (whatever the umask) when it creates it, and checks each with Lstat.
func mkdirIn(root *os.Root, name string, mode fs.FileMode) error {
	if parent := filepath.Dir(name); parent != "." {
		if err := mkdirIn(root, parent, mode); err != nil {
			return err
		}
	}
	err := root.Mkdir(name, mode.Perm())
	if err == nil {
		err = chmodIn(root, name, mode)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	info, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if err := checkInside(root, name, info); err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a folder", filepath.Join(root.Name(), name))
	}
	return nil
}

// openIn opens the file name in root, creating it with mode (whatever the umask) when it
// does not exist; an existing one must not be a symbolic link nor another user's.
func openIn(root *os.Root, name string, flag int, mode fs.FileMode) (*os.File, error) {
	f, err := root.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, mode.Perm()) // O_EXCL never follows a link
	if err == nil {
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return openExisting(root, name, flag)
}

// lockMode is the lock file's mode, whatever the folder's: only the run's owner may open
// it, so that no member of a team folder's group can hold the lock and make a dead run
// look alive, or block --fresh and --resume. (A group member's reader then cannot tell
// whether the run's launcher is alive, and shows the run as recorded.)
const lockMode fs.FileMode = 0o600

// openLock opens the run folder's lock file, making it lockMode (one an older version
// made 0640 too).
func openLock(root *os.Root) (*os.File, error) {
	lock, err := openIn(root, LockFile, os.O_RDWR, lockMode)
	if err != nil {
		return nil, err
	}
	if err := lock.Chmod(lockMode); err != nil {
		lock.Close()
		return nil, err
	}
	return lock, nil
}

// openExisting opens the existing file name in root once checkInside trusts it.
func openExisting(root *os.Root, name string, flag int) (*os.File, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if err := checkInside(root, name, info); err != nil {
		return nil, err
	}
	return root.OpenFile(name, flag, 0)
}

// readIn reads the file name in root, refusing a symbolic link.
func readIn(root *os.Root, name string) ([]byte, error) {
	f, err := openExisting(root, name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeIn writes the file name in root atomically: into a new temporary file beside it,
// synced, given mode, then renamed over name (a rename replaces a link, never follows
// it), then the folder is synced.
func writeIn(root *os.Root, name string, data []byte, mode fs.FileMode) error {
	tmp := "." + name + ".tmp-" + strconv.FormatUint(rand.Uint64(), 36)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer root.Remove(tmp) // fails harmlessly once renamed
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err == nil {
		err = syncIn(root, ".")
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// syncIn syncs the folder name in root: its entries become durable.
func syncIn(root *os.Root, name string) error {
	d, err := root.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
