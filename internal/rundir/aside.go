package rundir

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/durable"
)

// MoveAside moves the run folder dir, if there is one, out of the way of a run that
// starts over: to "<dir>.<time>" (such as fm.20261127-143005, with -2 to -9 when that
// is taken, then a random suffix, so that names another user made beforehand in a shared
// storage path cannot block it), and returns where it went ("" when there was no folder). Nothing is deleted.
// It refuses, as Open does, a folder that is a symbolic link or another user's, one in a
// storage path it does not trust, and one that a trainyard process holds (ErrBusy).
func MoveAside(dir string, now time.Time) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err := CheckStorage(filepath.Dir(dir)); err != nil {
		return "", err
	}
	f, err := openFolder(dir)
	if err != nil {
		return "", err
	}
	defer f.root.Close()
	lock, err := openLock(f.root)
	if err != nil {
		return "", fmt.Errorf("lock run folder: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return "", fmt.Errorf("%s: %w: another trainyard process is running it", dir, ErrBusy)
	}
	base := dir + "." + now.Format("20060102-150405")
	for n := 1; ; n++ {
		aside := asideName(base, n)
		err := durable.RenameNoReplace(dir, aside)
		switch {
		case err == nil:
			if err := durable.Sync(filepath.Dir(dir)); err != nil {
				return aside, fmt.Errorf("move run folder aside: %w", err)
			}
			return aside, nil
		case !errors.Is(err, fs.ErrExist) || n >= 100:
			return "", fmt.Errorf("move run folder aside: %w", err)
		}
	}
}

// asideName is the n-th name MoveAside tries: base, base-2 to base-9, then base-<random>.
func asideName(base string, n int) string {
	switch {
	case n == 1:
		return base
	case n < 10:
		return base + "-" + strconv.Itoa(n)
	}
	return base + "-" + rand.Text()[:8]
}
