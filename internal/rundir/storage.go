package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// ErrUntrustedStorage is returned (wrapped) by Open, MakeFolder and CheckStorage when
// someone other than root and the current user could rename or replace what is in the
// storage path.
var ErrUntrustedStorage = errors.New("storage path not trusted")

// CheckStorage checks that only root and the current user can change the storage path
// storage and every folder above it, up to /, so that nobody else can rename a run
// folder away while its job runs and put another in its place: each must belong to root
// or to the current user, and may be writable by its group or others only with the
// sticky bit (as /tmp is). This is the rule OpenSSH (StrictModes) and sudo apply to the
// folders above the files they trust. A symbolic link on the way is checked as a link
// (its owner), and the folders of its target as well. Folders that do not exist yet are
// skipped: whoever creates them later (Open does, 0700) owns them.
func CheckStorage(storage string) error {
	abs, err := filepath.Abs(storage)
	if err != nil {
		return fmt.Errorf("storage path %s: %w", storage, err)
	}
	if err := checkChain(abs, abs); err != nil {
		return err
	}
	real, err := resolve(abs)
	if err != nil {
		return fmt.Errorf("storage path %s: %w", storage, err)
	}
	if real == abs {
		return nil
	}
	return checkChain(real, abs)
}

// resolve returns path with the symbolic links of its longest existing part resolved.
func resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return real, err
	}
	parent := filepath.Dir(path)
	if parent == path {
		return path, nil
	}
	real, err = resolve(parent)
	return filepath.Join(real, filepath.Base(path)), err
}

// checkChain checks path and every folder above it; storage is the storage path as given,
// for the messages.
func checkChain(path, storage string) error {
	for p := path; ; p = filepath.Dir(p) {
		info, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("storage path %s: %w", storage, err)
		default:
			if err := checkTrusted(p, info, storage); err != nil {
				return err
			}
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

// checkTrusted checks one folder (or link) p of a storage path's chain.
func checkTrusted(p string, info fs.FileInfo, storage string) error {
	what := "storage path " + p
	if p != storage {
		what = fmt.Sprintf("%s (on the storage path %s)", p, storage)
	}
	if uid, ok := owner(info); ok && uid != 0 && uid != os.Geteuid() {
		notYou := "not to root"
		if os.Geteuid() != 0 {
			notYou = "neither to root nor to you, " + userName(os.Geteuid())
		}
		return fmt.Errorf("%s belongs to %s, %s (%w): its owner could rename a running job's folder and put "+
			"another in its place; give it to root (sudo chown root %s) or pick another --storage-path",
			what, userName(uid), notYou, ErrUntrustedStorage, p)
	}
	mode := info.Mode()
	if mode&fs.ModeSymlink != 0 || mode&0o022 == 0 || mode&fs.ModeSticky != 0 {
		return nil
	}
	who := "its group"
	if mode&0o002 != 0 {
		who = "every user"
	}
	return fmt.Errorf("%s is writable by %s (mode %s) and not sticky (%w): anyone who may write there could rename "+
		"a running job's folder and put their own in its place; make it sticky (chmod +t %s; for a team folder: "+
		"sudo chown root:TEAM %s && sudo chmod 3770 %s) or pick another --storage-path",
		what, who, octal(mode), ErrUntrustedStorage, p, p, p)
}

// octal formats a folder's mode as chmod takes it (2770).
func octal(mode fs.FileMode) string {
	m := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return fmt.Sprintf("%04o", m)
}

// userName returns "alice (uid 1001)", or "uid 1001" when the name is unknown.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
