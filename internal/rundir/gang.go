package rundir

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// DriverGangFile is the file of a run folder in which a Ray Train driver (the job's
// TorchTrainer.fit(), python/compat/ray/train/_driver.py) names the run folder of the gang
// it launched: {"run": "/abs/path"}.
const DriverGangFile = "ray-driver/gang.json"

// maxGangFile bounds what GangRun reads of DriverGangFile.
const maxGangFile = 64 << 10

// GangRun returns the run folder of the gang that a Ray Train driver in the run folder
// dir launched, and whether there is one: the job's results, checkpoints and curves are
// that run's, since the driver's own process reports nothing. It trusts the file only as
// far as a reader of run folders may: the file and the folder it names belong to this
// process's user, are no symbolic links, and the folder is a run folder (it holds a run
// record).
func GangRun(dir string) (string, bool) {
	f, err := os.OpenFile(filepath.Join(dir, DriverGangFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if !ownFile(f) {
		return "", false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxGangFile))
	if err != nil {
		return "", false
	}
	var g struct {
		Run string `json:"run"`
	}
	if json.Unmarshal(data, &g) != nil || !filepath.IsAbs(g.Run) || filepath.Clean(g.Run) != g.Run {
		return "", false
	}
	for _, p := range []string{g.Run, filepath.Join(g.Run, RecordFile)} {
		info, err := os.Lstat(p)
		if err != nil || info.Mode()&os.ModeSymlink != 0 || !ownInfo(info) {
			return "", false
		}
	}
	return g.Run, true
}

// ResultsDir returns the run folder whose results stand for the run in dir: the gang's
// run of a Ray Train driver (GangRun), else dir itself.
func ResultsDir(dir string) string {
	if gang, ok := GangRun(dir); ok {
		return gang
	}
	return dir
}

// ownFile reports whether the open file f belongs to this process's user.
func ownFile(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && ownInfo(info)
}

// ownInfo reports whether info is of a file of this process's user.
func ownInfo(info os.FileInfo) bool {
	uid, ok := owner(info)
	return ok && uid == os.Geteuid()
}
