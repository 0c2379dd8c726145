package upload

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// List, Stat, Touch and Remove: what the server's upload quota needs of the store.
func TestStoreListTouchRemove(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	archive := zipOf(t, fileEntry("main.py", "print('hi')\n"))
	if err := s.Put(pkgName, bytes.NewReader(archive), Limits{}); err != nil {
		t.Fatal(err)
	}
	used := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.Touch(pkgName, used); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []Info{{Name: pkgName, Size: int64(len(archive)), Used: used}}
	if diff := cmp.Diff(want, list, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if err := s.Remove(pkgName); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(pkgName); err != nil {
		t.Errorf("Remove of a removed package: %v, want nil", err)
	}
	if _, err := s.Stat(pkgName); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a removed package: %v, want fs.ErrNotExist", err)
	}
	if err := s.Remove("../escape.zip"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Remove of a bad name: %v, want ErrInvalidName", err)
	}
}

// UnpackedSize is what the files claim, which Extract writes at most.
func TestUnpackedSize(t *testing.T) {
	archive := zipOf(t, fileEntry("a.txt", "12345"), dirEntry("d/"), fileEntry("d/b.txt", "123"))
	n, err := UnpackedSize(bytes.NewReader(archive), int64(len(archive)), Limits{})
	if err != nil || n != 8 {
		t.Errorf("UnpackedSize = %d, %v; want 8", n, err)
	}
	if _, err := UnpackedSize(bytes.NewReader(archive), int64(len(archive)), Limits{MaxTotalBytes: 7}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("UnpackedSize over MaxTotalBytes: %v, want ErrTooLarge", err)
	}
}
