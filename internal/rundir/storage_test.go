package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A storage path that someone other than root and the job's user could change is
// refused before anything is created, with a message saying how to fix it.
func TestOpenRefusesUntrustedStoragePath(t *testing.T) {
	cases := map[string]struct {
		mode     fs.FileMode // of the storage path
		above    fs.FileMode // of the folder above it (0: leave it 0700)
		owner    int         // of the storage path (-1: leave it)
		want     string      // in the error; "" when Open succeeds
		needRoot bool
	}{
		"private 0700":               {mode: 0o700, owner: -1},
		"shared read-only 0755":      {mode: 0o755, owner: -1},
		"team folder 3770":           {mode: 0o770 | fs.ModeSetgid | fs.ModeSticky, owner: -1},
		"like /tmp 1777":             {mode: 0o777 | fs.ModeSticky, owner: -1},
		"group-writable 2770":        {mode: 0o770 | fs.ModeSetgid, owner: -1, want: "writable by its group (mode 2770) and not sticky"},
		"writable by all 0777":       {mode: 0o777, owner: -1, want: "writable by every user (mode 0777) and not sticky"},
		"folder above writable 0777": {mode: 0o700, above: 0o777, owner: -1, want: "(on the storage path "},
		"another user's":             {mode: 0o755, owner: otherUID, want: "belongs to uid 12345", needRoot: true},
		"root's, when not root":      {mode: 0o755, owner: 0, needRoot: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.needRoot {
				needRoot(t)
			}
			job := testJob(t)
			storage := job.Spec.StoragePath
			mkdirMode(t, storage, tc.mode)
			if tc.above != 0 {
				if err := os.Chmod(filepath.Dir(storage), tc.above); err != nil {
					t.Fatal(err)
				}
			}
			if tc.owner >= 0 {
				if err := os.Chown(storage, tc.owner, -1); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Open(job, Options{})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				r.Close()
				return
			}
			if !errors.Is(err, ErrUntrustedStorage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want ErrUntrustedStorage with %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "--storage-path") {
				t.Errorf("the error says nothing of what to do: %v", err)
			}
			if entries, _ := os.ReadDir(storage); len(entries) != 0 {
				t.Errorf("Open created %d entries in a storage path it refused", len(entries))
			}
			if err := MakeFolder(filepath.Join(storage, "x")); !errors.Is(err, ErrUntrustedStorage) {
				t.Errorf("MakeFolder: %v, want ErrUntrustedStorage", err)
			}
			if _, err := Open(job, Options{Secondary: true}); !errors.Is(err, ErrUntrustedStorage) {
				t.Errorf("secondary Open: %v, want ErrUntrustedStorage", err)
			}
		})
	}
}

func TestUntrustedStoragePathAdvice(t *testing.T) {
	job := testJob(t)
	mkdirMode(t, job.Spec.StoragePath, 0o770|fs.ModeSetgid)
	_, err := Open(job, Options{})
	p := job.Spec.StoragePath
	for _, want := range []string{"chmod +t " + p, "sudo chown root:TEAM " + p + " && sudo chmod 3770 " + p} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open: %v, want advice %q", err, want)
		}
	}
}

// WarnStorage (Kubernetes workers) passes on what Open would refuse, once, and opens.
func TestWarnStorage(t *testing.T) {
	job := testJob(t)
	mkdirMode(t, job.Spec.StoragePath, 0o777)
	var warned []error
	r, err := Open(job, Options{WarnStorage: func(err error) { warned = append(warned, err) }})
	if err != nil {
		t.Fatalf("Open with WarnStorage: %v", err)
	}
	r.Close()
	if len(warned) != 1 || !errors.Is(warned[0], ErrUntrustedStorage) {
		t.Errorf("warnings %v, want one wrapping ErrUntrustedStorage", warned)
	}
}

// A symbolic link on the way to the storage path is followed by the check: the
// folders it leads to are checked too.
func TestStoragePathThroughALink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "real")
	mkdirMode(t, target, 0o777)
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckStorage(filepath.Join(link, "runs")); !errors.Is(err, ErrUntrustedStorage) ||
		!strings.Contains(err.Error(), target) {
		t.Errorf("CheckStorage through a link to a 0777 folder: %v, want ErrUntrustedStorage naming %s", err, target)
	}
}

// The run folder's path swapped for another folder, or for a link to the real one,
// while the run holds it: CheckSame says so; the run's own folder is still reached
// through OpenRoot.
func TestCheckSame(t *testing.T) {
	for _, swap := range []string{"folder", "link", "gone"} {
		t.Run(swap, func(t *testing.T) {
			job := testJob(t)
			r, err := Open(job, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.CheckSame(); err != nil {
				t.Fatalf("CheckSame of the folder as opened: %v", err)
			}
			moved := r.Dir + ".moved"
			if err := os.Rename(r.Dir, moved); err != nil {
				t.Fatal(err)
			}
			switch swap {
			case "folder":
				err = os.Mkdir(r.Dir, 0o700)
			case "link":
				err = os.Symlink(moved, r.Dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			err = r.CheckSame()
			if !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), "refusing to resume") ||
				!strings.Contains(err.Error(), r.ID()) {
				t.Errorf("CheckSame after the swap: %v, want ErrReplaced naming the folder's ID", err)
			}
			root, err := r.OpenRoot()
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if _, err := root.Stat(RecordFile); err != nil {
				t.Errorf("OpenRoot does not reach the run's own folder: %v", err)
			}
			pinned, done, err := r.Pinned()
			if err != nil {
				t.Fatalf("Pinned: %v", err)
			}
			defer done()
			if _, err := os.Stat(filepath.Join(pinned, RecordFile)); err != nil {
				t.Errorf("Pinned (%s) does not lead to the run's own folder: %v", pinned, err)
			}
		})
	}
}

// ID is the device and inode Python's os.stat gives.
func TestID(t *testing.T) {
	r, err := Open(testJob(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	info, err := os.Stat(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	if want := fmt.Sprintf("%d:%d", st.Dev, st.Ino); r.ID() != want {
		t.Errorf("ID() = %q, want %q", r.ID(), want)
	}
}

// mkdirMode makes the folder path with mode, whatever the umask.
func mkdirMode(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
