package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A file system that cannot rename a folder with files (GCS FUSE without
// --rename-dir-limit answers EMFILE) is refused when the run folder is opened, with what
// to do, and nothing of the probe is left; one that can is used as before.
func TestFolderRenamesProbed(t *testing.T) {
	job := testJob(t)
	storage := job.Spec.StoragePath
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()

	renameIn = func(*os.Root, string, string) error { return syscall.EMFILE }
	t.Cleanup(func() { renameIn = (*os.Root).Rename })
	job = testJob(t)
	job.Spec.StoragePath, job.Spec.RunName = storage, "on-gcsfuse"
	_, err = Open(job, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot rename a folder that holds files (too many open files)") ||
		!strings.Contains(err.Error(), "--rename-dir-limit") || !strings.Contains(err.Error(), "s3://bucket/prefix") {
		t.Fatalf("Open = %v; want the probe's refusal", err)
	}
	if _, err := os.Stat(filepath.Join(storage, "on-gcsfuse")); !os.IsNotExist(err) {
		t.Errorf("the refused run's folder is left: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(storage, "mnist"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".trainyard-probe-") {
			t.Errorf("the probe left %s", e.Name())
		}
	}
}

func TestFsType(t *testing.T) {
	if got := fsType("/proc/self"); !strings.Contains(got, "proc, mounted at /proc") {
		t.Errorf("fsType(/proc/self) = %q", got)
	}
}
