package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MoveAside moves a run folder to <dir>.<time>, numbering when that is taken; it moves
// nothing when there is no folder, and refuses one a process holds or a link.
func TestMoveAside(t *testing.T) {
	job := testJob(t)
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	at := time.Date(2026, time.November, 27, 14, 30, 5, 0, time.Local)
	if aside, err := MoveAside(dir, at); aside != "" || err != nil {
		t.Fatalf("MoveAside of no folder = %q, %v; want nothing moved", aside, err)
	}

	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MoveAside(dir, at); !errors.Is(err, ErrBusy) {
		t.Errorf("MoveAside of a run in use: %v, want ErrBusy", err)
	}
	r.Close()
	for _, want := range []string{dir + ".20261127-143005", dir + ".20261127-143005-2"} {
		aside, err := MoveAside(dir, at)
		if err != nil || aside != want {
			t.Fatalf("MoveAside = %q, %v; want %q", aside, err, want)
		}
		if _, err := os.Stat(filepath.Join(aside, RecordFile)); err != nil {
			t.Errorf("the folder moved aside lost its record: %v", err)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("the run folder is still there: %v", err)
		}
		if r, err = Open(job, Options{}); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}

	target := t.TempDir()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := MoveAside(dir, at.Add(time.Hour)); !errors.Is(err, ErrUntrusted) {
		t.Errorf("MoveAside of a link: %v, want ErrUntrusted", err)
	}
}

// Names another user made beforehand in a shared storage path do not block MoveAside:
// after <dir>.<time> and -2 to -9, it picks a random name.
func TestMoveAsidePastTakenNames(t *testing.T) {
	job := testJob(t)
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	at := time.Date(2026, time.November, 27, 14, 30, 5, 0, time.Local)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	base := dir + ".20261127-143005"
	taken := map[string]bool{base: true}
	for n := 2; n <= 100; n++ { // every name MoveAside tried on main
		taken[fmt.Sprintf("%s-%d", base, n)] = true
	}
	for name := range taken {
		if err := os.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	aside, err := MoveAside(dir, at)
	if err != nil || taken[aside] || !strings.HasPrefix(aside, base+"-") {
		t.Fatalf("MoveAside = %q, %v; want a name of its own beside %s", aside, err, base)
	}
	if _, err := os.Stat(filepath.Join(aside, RecordFile)); err != nil {
		t.Errorf("the folder moved aside lost its record: %v", err)
	}
}

// The lock file is the owner's alone, one an older version made 0640 included: no
// member of a team folder's group can hold it.
func TestLockIsTheOwners(t *testing.T) {
	job := testJob(t)
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	lock := filepath.Join(dir, LockFile)
	if err := os.Chmod(lock, 0o640); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(job, Options{}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if info, err := os.Stat(lock); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("lock file %v, %v; want mode 0600", info.Mode(), err)
	}
}
