package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/secrets"
)

// File names inside a run's folder.
const (
	SpecFile   = "job.yaml"
	RecordFile = "run.json"
	LockFile   = ".lock"
	LogsDir    = "logs"
	// ConsoleLog is the run's console log (trainyard logs RUN): every line, unfolded, as
	// trainyard run writes it; a server job's is its supervisor's output.
	ConsoleLog = "console.log"
)

// ErrFinished is returned (wrapped) by Open when the run already succeeded.
var ErrFinished = errors.New("run already finished")

// ErrBusy is returned (wrapped) by Open when another supervisor holds the run.
var ErrBusy = errors.New("run is in use")

// Run is an open run folder. Its methods are safe for concurrent use.
type Run struct {
	Dir    string
	root   *os.Root    // the folder, opened: nothing inside is reached through a link out of it
	opened fs.FileInfo // the folder as opened: CheckSame compares Dir with it
	perm   Perm
	lock   *os.File // nil for a secondary

	mu        sync.Mutex
	rec       Record
	now       func() time.Time
	secondary bool
}

// Options tune Open. The zero value refuses a finished run and uses the real clock.
type Options struct {
	// Rerun continues a run that already succeeded, with new attempts (run --resume).
	Rerun bool
	Now   func() time.Time
	// Secondary opens the folder of a run whose record another process keeps: worker 0
	// of a gang whose workers share the folder (pods on Kubernetes), when this process
	// runs another worker. The folder must exist; no lock is taken; run.json is read if
	// it is there but never written, and neither is job.yaml; Update changes only the
	// copy in memory. Only the rank logs of this process's ranks are written (CreateLog).
	// A succeeded run is not refused (worker 0 refuses it); Rerun has no effect.
	Secondary bool
	// WarnStorage, when set, gets the error of a storage path that CheckStorage refuses,
	// which is then used all the same; by default Open refuses it. Kubernetes workers set
	// it: their storage path is a volume (a PVC's root is often 0777, or 2775 for an
	// fsGroup) that only the pods given the claim mount, so Unix users are not who the
	// check keeps out there.
	WarnStorage func(error)
}

// Open creates or continues the run folder <storage>/<name> for job, locks it, and writes
// the job spec. It refuses a run that succeeded (ErrFinished) unless opts.Rerun, one
// that another process holds (ErrBusy), and a folder that is a symbolic link or another
// user's (ErrUntrusted). When it fails on a folder it created, holding its lock, it
// removes the folder; it never removes a folder whose lock it did not get.
//
// It also refuses a storage path that someone other than root and the current user
// could change (ErrUntrustedStorage, see CheckStorage) before it creates anything,
// unless opts.WarnStorage. A missing storage path is created 0700; the run folder and
// what Open and the Run write in it get the modes of PermFor.
func Open(job *v1.TrainJob, opts Options) (*Run, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	dir := jobspec.RunFolder(&job.Spec)
	if opts.Secondary {
		return openSecondary(dir, job, now, opts.WarnStorage)
	}
	f, err := makeFolder(dir, opts.WarnStorage)
	if err != nil {
		return nil, err
	}
	return open(dir, f, job, now, opts.Rerun)
}

// open locks the opened folder f and loads its record. Once the lock is held, a failure
// removes a folder this process created (before releasing the lock, so that no other
// process holds it meanwhile).
func open(dir string, f folder, job *v1.TrainJob, now func() time.Time, rerun bool) (*Run, error) {
	r := &Run{Dir: dir, root: f.root, opened: f.opened, perm: f.perm, now: now}
	lock, err := openLock(f.root)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("lock run folder: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		r.Close()
		return nil, fmt.Errorf("%s: %w: another trainyard process is running it", dir, ErrBusy)
	}
	r.lock = lock
	err = probeRenames(f.root, dir)
	if err == nil {
		err = r.load(job, rerun)
	}
	if err == nil {
		err = r.writeSpec(job)
	}
	if err != nil {
		if f.created {
			_ = os.RemoveAll(dir)
		}
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Run) load(job *v1.TrainJob, rerun bool) error {
	data, err := readIn(r.root, RecordFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t := r.now()
		r.rec = Record{Name: job.Spec.RunName, Phase: v1.PhasePending, Created: t, Updated: t, Host: hostname()}
		return r.saveLocked()
	case err != nil:
		return fmt.Errorf("read run record: %w", err)
	}
	if err := json.Unmarshal(data, &r.rec); err != nil {
		return fmt.Errorf("read run record %s: %w", filepath.Join(r.Dir, RecordFile), err)
	}
	if r.rec.Phase == v1.PhaseSucceeded && !rerun {
		return fmt.Errorf("%s: %w (succeeded %s); pick another --name, give --fresh to start it over (the old folder is kept), "+
			"or --resume to continue it from its last checkpoint",
			r.Dir, ErrFinished, r.rec.Updated.Format(time.RFC3339))
	}
	return nil
}

// openSecondary opens dir without locking or writing anything. Like Open, it refuses a
// folder that is a symbolic link or another user's: the workers of a gang that share the
// folder run the same image as the same user.
func openSecondary(dir string, job *v1.TrainJob, now func() time.Time, warn func(error)) (*Run, error) {
	if err := checkStorage(filepath.Dir(dir), warn); err != nil {
		return nil, err
	}
	f, err := openFolder(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, root: f.root, opened: f.opened, perm: f.perm, now: now, secondary: true}
	data, err := readIn(f.root, RecordFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t := now()
		r.rec = Record{Name: job.Spec.RunName, Phase: v1.PhasePending, Created: t, Updated: t}
	case err != nil:
		r.Close()
		return nil, fmt.Errorf("read run record: %w", err)
	default:
		if err := json.Unmarshal(data, &r.rec); err != nil {
			r.Close()
			return nil, fmt.Errorf("read run record %s: %w", filepath.Join(dir, RecordFile), err)
		}
	}
	return r, nil
}

// writeSpec writes job.yaml, with the values of secret variables redacted: the run folder
// may be shared with a group, and nothing reads them back from it.
func (r *Run) writeSpec(job *v1.TrainJob) error {
	shown := job.DeepCopy()
	shown.Spec.Env = secrets.Redacted(shown.Spec.Env)
	data, err := yaml.Marshal(shown)
	if err != nil {
		return fmt.Errorf("encode job spec: %w", err)
	}
	return writeIn(r.root, SpecFile, data, r.perm.File)
}

// Perm returns the modes for what is created in the run folder (see PermFor).
func (r *Run) Perm() Perm { return r.perm }

// Close releases the folder's lock.
func (r *Run) Close() error {
	var err error
	if r.lock != nil {
		err = r.lock.Close()
	}
	if r.root != nil {
		if cerr := r.root.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Record returns a copy of the run's record.
func (r *Run) Record() Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, _ := json.Marshal(r.rec)
	var c Record
	_ = json.Unmarshal(data, &c)
	return c
}

// Update changes the record under the lock and writes it to disk; for a secondary (see
// Options.Secondary) it changes only the copy in memory.
func (r *Run) Update(change func(*Record)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	change(&r.rec)
	r.rec.Updated = r.now()
	if r.secondary {
		return nil
	}
	return r.saveLocked()
}

func (r *Run) saveLocked() error {
	data, err := json.MarshalIndent(r.rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode run record: %w", err)
	}
	return writeIn(r.root, RecordFile, append(data, '\n'), r.perm.File)
}

// LogPath returns the log file of a rank in an attempt, relative to the run folder.
func LogPath(attempt, rank int) string {
	return filepath.Join(LogsDir, fmt.Sprintf("attempt-%d", attempt), fmt.Sprintf("rank-%d.log", rank))
}

// CreateLog creates the log file of a rank in an attempt (or opens it to append). Neither
// the file nor its folders may be symbolic links.
func (r *Run) CreateLog(attempt, rank int) (*os.File, error) {
	p := LogPath(attempt, rank)
	if err := mkdirIn(r.root, filepath.Dir(p), r.perm.Dir); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	f, err := openIn(r.root, p, os.O_WRONLY|os.O_APPEND, r.perm.File)
	if err != nil {
		return nil, fmt.Errorf("create log of rank %d: %w", rank, err)
	}
	return f, nil
}

// CreateConsoleLog creates the run's console log (or opens it to append); it may not be
// a symbolic link.
func (r *Run) CreateConsoleLog() (*os.File, error) {
	f, err := openIn(r.root, ConsoleLog, os.O_WRONLY|os.O_APPEND, r.perm.File)
	if err != nil {
		return nil, fmt.Errorf("create console log: %w", err)
	}
	return f, nil
}

// ReadRecord reads the run.json of a run folder without locking it, for those who follow
// a run from outside (the job server, tests). It refuses a run.json that is a symbolic
// link.
func ReadRecord(dir string) (Record, error) {
	var rec Record
	data, err := readNoFollow(filepath.Join(dir, RecordFile))
	if err != nil {
		return rec, fmt.Errorf("read run record: %w", err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("read run record %s: %w", filepath.Join(dir, RecordFile), err)
	}
	return rec, nil
}

// readNoFollow reads the file at path, refusing a symbolic link.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
