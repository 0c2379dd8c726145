package rundir

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// renameIn is os.Root.Rename; a test makes it fail as a file system that cannot rename a
// folder with files in it does.
var renameIn = (*os.Root).Rename

// probeRenames checks that the run folder's file system does what a checkpoint commit
// does: rename a folder that holds a file. GCS FUSE without --rename-dir-limit (and some
// other FUSE and CSI file systems) refuses it, and the run would fail at its first
// checkpoint; it is refused here instead, naming the file system and what to do.
func probeRenames(root *os.Root, dir string) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	probe := ".trainyard-probe-" + hex.EncodeToString(b[:])
	defer root.RemoveAll(probe)
	err := root.Mkdir(probe, 0o700)
	if err == nil {
		err = root.Mkdir(probe+"/a", 0o700)
	}
	if err == nil {
		err = root.WriteFile(probe+"/a/file", []byte("probe"), 0o600)
	}
	if err != nil {
		return fmt.Errorf("run folder %s: write: %w", dir, err)
	}
	if err := renameIn(root, probe+"/a", probe+"/b"); err != nil {
		return fmt.Errorf("run folder %s: its file system%s cannot rename a folder that holds files (%w), which every "+
			"checkpoint commit does; for GCS FUSE mount it with --rename-dir-limit above the files of a checkpoint (or "+
			"--profile aiml-checkpointing), or keep the runs in a bucket: --storage-path s3://bucket/prefix (docs/storage.md)",
			dir, fsType(dir), err)
	}
	return nil
}

// fsType names the file system of the mount that holds path, from /proc/self/mountinfo
// (" (fuse.gcsfuse, mounted at /mnt/ckpt)"); "" when it cannot be told.
func fsType(path string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	best, kind := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mount := fields[4]
		if within(path, mount) && len(mount) >= len(best) {
			best, kind = mount, fields[sep+1]
		}
	}
	if kind == "" {
		return ""
	}
	return fmt.Sprintf(" (%s, mounted at %s)", kind, best)
}

// within says whether path is mount or below it.
func within(path, mount string) bool {
	rel, err := filepath.Rel(mount, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
