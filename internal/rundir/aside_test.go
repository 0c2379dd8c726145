package rundir

import (
	"errors"
	"os"
	"path/filepath"
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
