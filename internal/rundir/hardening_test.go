package rundir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// otherUID owns what a test plants as "another user".
const otherUID = 12345

// needRoot skips a test that chowns files to another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
}

// modes returns the permission bits (and setgid) of everything under dir, by path
// relative to dir.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel] = info.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSymlink)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// openWithLog opens job's run, writes a record and a rank log, and closes it.
func openWithLog(t *testing.T, job *v1.TrainJob) string {
	t.Helper()
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Update(func(rec *Record) { rec.Attempts = append(rec.Attempts, Attempt{Number: 1}) }); err != nil {
		t.Fatal(err)
	}
	f, err := r.CreateLog(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return r.Dir
}

func TestRunFolderIsPrivate(t *testing.T) {
	old := setUmask(0o022)
	defer setUmask(old)
	job := testJob(t)
	dir := openWithLog(t, job)
	want := map[string]fs.FileMode{
		".": 0o700, SpecFile: 0o600, RecordFile: 0o600, LockFile: 0o600,
		"logs": 0o700, "logs/attempt-1": 0o700, "logs/attempt-1/rank-0.log": 0o600,
	}
	assertModes(t, dir, want)
	if info, err := os.Stat(job.Spec.StoragePath); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("storage path created by Open: %v (%v), want 0700", info.Mode(), err)
	}
}

func TestRunFolderSharedWithSetgidStoragePath(t *testing.T) {
	old := setUmask(0o077) // the modes asked for, whatever the umask
	defer setUmask(old)
	job := testJob(t)
	if err := os.Mkdir(job.Spec.StoragePath, 0o700); err != nil {
		t.Fatal(err)
	}
	team := 0o770 | fs.ModeSetgid | fs.ModeSticky // chmod 3770, as the README says
	if err := os.Chmod(job.Spec.StoragePath, team); err != nil {
		t.Fatal(err)
	}
	dir := openWithLog(t, job)
	setgid := fs.ModeSetgid
	want := map[string]fs.FileMode{
		".": 0o750 | setgid, SpecFile: 0o640, RecordFile: 0o640, LockFile: 0o600,
		"logs": 0o750 | setgid, "logs/attempt-1": 0o750 | setgid, "logs/attempt-1/rank-0.log": 0o640,
	}
	assertModes(t, dir, want)
	if info, _ := os.Stat(job.Spec.StoragePath); info.Mode()&(fs.ModePerm|setgid|fs.ModeSticky) != team {
		t.Errorf("Open changed the storage path's mode to %v", info.Mode())
	}
}

func TestOpenLeavesExistingStoragePathMode(t *testing.T) {
	job := testJob(t)
	if err := os.Mkdir(job.Spec.StoragePath, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(job.Spec.StoragePath, 0o755); err != nil {
		t.Fatal(err)
	}
	openWithLog(t, job)
	if info, _ := os.Stat(job.Spec.StoragePath); info.Mode().Perm() != 0o755 {
		t.Errorf("Open changed the existing storage path's mode to %v", info.Mode())
	}
}

func assertModes(t *testing.T, dir string, want map[string]fs.FileMode) {
	t.Helper()
	got := modes(t, dir)
	for name, mode := range want {
		if got[filepath.FromSlash(name)] != mode {
			t.Errorf("%s: mode %v, want %v", name, got[filepath.FromSlash(name)], mode)
		}
	}
	for name := range got {
		if _, ok := want[filepath.ToSlash(name)]; !ok {
			t.Errorf("unexpected %s in the run folder", name)
		}
	}
}

func TestOpenRefusesSymlinkedRunFolder(t *testing.T) {
	job := testJob(t)
	target := t.TempDir()
	if err := os.MkdirAll(job.Spec.StoragePath, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]Options{"primary": {}, "secondary": {Secondary: true}} {
		_, err := Open(job, opts)
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s Open of a symlinked run folder: %v, want ErrUntrusted naming %s", name, err, dir)
		}
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("Open wrote %d entries into the link's target", len(entries))
	}
	if err := MakeFolder(dir); !errors.Is(err, ErrUntrusted) {
		t.Errorf("MakeFolder of a symlinked run folder: %v, want ErrUntrusted", err)
	}
}

func TestOpenRefusesAnotherUsersRunFolder(t *testing.T) {
	needRoot(t)
	job := testJob(t)
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]Options{"primary": {}, "secondary": {Secondary: true}} {
		_, err := Open(job, opts)
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "belongs to uid 12345") {
			t.Errorf("%s Open of another user's run folder: %v, want ErrUntrusted naming the owner", name, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Open wrote %d entries into another user's folder", len(entries))
	}
}

func TestOpenDoesNotFollowLinksInside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := testJob(t)
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// job.yaml is replaced, not written through.
	if err := os.Symlink(outside, filepath.Join(dir, SpecFile)); err != nil {
		t.Fatal(err)
	}
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(filepath.Join(dir, SpecFile)); err != nil || !info.Mode().IsRegular() {
		t.Errorf("job.yaml after Open: %v (%v), want a regular file in place of the link", info.Mode(), err)
	}
	// A link in place of the logs folder is refused.
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, LogsDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateLog(1, 0); !errors.Is(err, ErrUntrusted) {
		t.Errorf("CreateLog with logs/ a link: %v, want ErrUntrusted", err)
	}
	os.Remove(filepath.Join(dir, LogsDir))
	// A link in place of a rank log is refused.
	if err := os.MkdirAll(filepath.Join(dir, "logs", "attempt-2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, LogPath(2, 0))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateLog(2, 0); err == nil {
		t.Error("CreateLog through a link to a file outside succeeded")
	}
	r.Close()
	// A link in place of run.json is not read, nor is a link in place of .lock opened.
	os.Remove(filepath.Join(dir, RecordFile))
	if err := os.Symlink(outside, filepath.Join(dir, RecordFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(job, Options{}); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Open with run.json a link: %v, want ErrUntrusted", err)
	}
	if _, err := ReadRecord(dir); err == nil {
		t.Error("ReadRecord read run.json through a link")
	}
	os.Remove(filepath.Join(dir, RecordFile))
	os.Remove(filepath.Join(dir, LockFile))
	if err := os.Symlink(outside, filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(job, Options{}); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Open with .lock a link: %v, want ErrUntrusted", err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "untouched" {
		t.Errorf("the file outside the run folder changed: %q", data)
	}
}

// Many processes opening the same new run at once: exactly one holds it, and its folder
// and files survive the others' failures.
func TestOpenSameRunConcurrently(t *testing.T) {
	for round := range 20 {
		job := testJob(t)
		const n = 16
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			runs  = make([]*Run, n)
			errs  = make([]error, n)
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				runs[i], errs[i] = Open(job, Options{})
			}()
		}
		close(start)
		wg.Wait()
		var winner *Run
		for i, err := range errs {
			switch {
			case err == nil && winner == nil:
				winner = runs[i]
			case err == nil:
				t.Fatalf("round %d: two Opens of the same run both hold it", round)
			case !errors.Is(err, ErrBusy):
				t.Fatalf("round %d: Open: %v, want ErrBusy for all but one", round, err)
			}
		}
		if winner == nil {
			t.Fatalf("round %d: no Open got the run", round)
		}
		if err := winner.Update(func(rec *Record) { rec.Attempts = append(rec.Attempts, Attempt{Number: 1}) }); err != nil {
			t.Fatalf("round %d: the winner's folder is gone: %v", round, err)
		}
		for _, name := range []string{SpecFile, RecordFile, LockFile} {
			if _, err := os.Stat(filepath.Join(winner.Dir, name)); err != nil {
				t.Errorf("round %d: the winner's %s is gone: %v", round, name, err)
			}
		}
		winner.Close()
	}
}

func TestMakeFolder(t *testing.T) {
	storage := filepath.Join(t.TempDir(), "results")
	dir := filepath.Join(storage, "job")
	if err := MakeFolder(dir); err != nil {
		t.Fatal(err)
	}
	if err := MakeFolder(dir); err != nil {
		t.Errorf("MakeFolder of an existing folder of ours: %v", err)
	}
	for _, p := range []string{storage, dir} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v (%v), want 0700", p, info.Mode(), err)
		}
	}
}

// setUmask sets the process's umask and returns the previous one.
func setUmask(mask int) int { return syscall.Umask(mask) }
