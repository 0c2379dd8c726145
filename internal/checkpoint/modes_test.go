package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A committed checkpoint is as private as its run folder: read-only to its owner in a
// private run folder; in one shared with a group (setgid) readable by that group, whose
// group its files and folders get even when they were made elsewhere (a copy).
func TestCommittedModes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the run folder another group")
	}
	for name, c := range map[string]struct {
		run              fs.FileMode
		gid              int
		dirMode, fileMod fs.FileMode
	}{
		"private": {run: 0o700, gid: 0, dirMode: 0o700, fileMod: 0o400},
		"shared":  {run: 0o750 | fs.ModeSetgid, gid: 12345, dirMode: 0o750, fileMod: 0o440},
	} {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			if err := os.Chown(s.Dir(), 0, c.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(s.Dir(), c.run); err != nil {
				t.Fatal(err)
			}
			src := writeCheckpoint(t, t.TempDir(), 1) // elsewhere: copied, root's group, 0644
			info, err := s.Commit(src, Meta{Iteration: 1, Attempt: 1, Time: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			err = filepath.Walk(info.Dir, func(p string, fi os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				want := c.fileMod
				if fi.IsDir() {
					want = c.dirMode
				}
				gid := int(fi.Sys().(*syscall.Stat_t).Gid)
				if fi.Mode().Perm() != want || gid != c.gid {
					t.Errorf("%s: mode %v group %d; want %v, group %d", p, fi.Mode().Perm(), gid, want, c.gid)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
