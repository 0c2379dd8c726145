package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/durable"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// File names inside a run's folder.
const (
	SpecFile   = "job.yaml"
	RecordFile = "run.json"
	LockFile   = ".lock"
	LogsDir    = "logs"
)

// ErrFinished is returned (wrapped) by Open when the run already succeeded.
var ErrFinished = errors.New("run already finished")

// ErrBusy is returned (wrapped) by Open when another supervisor holds the run.
var ErrBusy = errors.New("run is in use")

// Run is an open run folder. Its methods are safe for concurrent use.
type Run struct {
	Dir  string
	lock *os.File // nil for a secondary

	mu        sync.Mutex
	rec       Record
	now       func() time.Time
	secondary bool
}

// Options tune Open. The zero value refuses a finished run and uses the real clock.
type Options struct {
	// Rerun continues a run that already succeeded, with new attempts.
	Rerun bool
	Now   func() time.Time
	// Secondary opens the folder of a run whose record another process keeps: worker 0
	// of a gang whose workers share the folder (pods on Kubernetes), when this process
	// runs another worker. The folder must exist; no lock is taken; run.json is read if
	// it is there but never written, and neither is job.yaml; Update changes only the
	// copy in memory. Only the rank logs of this process's ranks are written (CreateLog).
	// A succeeded run is not refused (worker 0 refuses it); Rerun has no effect.
	Secondary bool
}

// Open creates or continues the run folder <storage>/<name> for job, locks it, and writes
// the job spec. It refuses a run that succeeded (ErrFinished) unless opts.Rerun, and one
// that another process holds (ErrBusy). Nothing is left behind when it fails on a folder it
// created.
func Open(job *v1.TrainJob, opts Options) (*Run, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	if opts.Secondary {
		return openSecondary(dir, job, now)
	}
	created, err := makeDir(dir)
	if err != nil {
		return nil, err
	}
	r, err := open(dir, job, now, opts.Rerun)
	if err != nil && created {
		_ = os.RemoveAll(dir)
	}
	return r, err
}

func makeDir(dir string) (created bool, err error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create run folder: %w", err)
	}
	return true, nil
}

func open(dir string, job *v1.TrainJob, now func() time.Time, rerun bool) (*Run, error) {
	lock, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock run folder: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%s: %w: another trainyard process is running it", dir, ErrBusy)
	}
	r := &Run{Dir: dir, lock: lock, now: now}
	if err := r.load(job, rerun); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.writeSpec(job); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Run) load(job *v1.TrainJob, rerun bool) error {
	data, err := os.ReadFile(filepath.Join(r.Dir, RecordFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t := r.now()
		r.rec = Record{Name: job.Spec.RunName, Phase: v1.PhasePending, Created: t, Updated: t}
		return r.saveLocked()
	case err != nil:
		return fmt.Errorf("read run record: %w", err)
	}
	if err := json.Unmarshal(data, &r.rec); err != nil {
		return fmt.Errorf("read run record %s: %w", filepath.Join(r.Dir, RecordFile), err)
	}
	if r.rec.Phase == v1.PhaseSucceeded && !rerun {
		return fmt.Errorf("%s: %w (succeeded %s); pick another --name, or give --rerun to run it again from its last checkpoint",
			r.Dir, ErrFinished, r.rec.Updated.Format(time.RFC3339))
	}
	return nil
}

// openSecondary opens dir without locking or writing anything.
func openSecondary(dir string, job *v1.TrainJob, now func() time.Time) (*Run, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open run folder: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("open run folder: %s is not a folder", dir)
	}
	r := &Run{Dir: dir, now: now, secondary: true}
	rec, err := ReadRecord(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t := now()
		rec = Record{Name: job.Spec.RunName, Phase: v1.PhasePending, Created: t, Updated: t}
	case err != nil:
		return nil, err
	}
	r.rec = rec
	return r, nil
}

func (r *Run) writeSpec(job *v1.TrainJob) error {
	data, err := yaml.Marshal(job)
	if err != nil {
		return fmt.Errorf("encode job spec: %w", err)
	}
	return durable.WriteFile(filepath.Join(r.Dir, SpecFile), data, 0o644)
}

// Close releases the folder's lock.
func (r *Run) Close() error {
	if r.lock == nil {
		return nil
	}
	return r.lock.Close()
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
	return durable.WriteFile(filepath.Join(r.Dir, RecordFile), append(data, '\n'), 0o644)
}

// LogPath returns the log file of a rank in an attempt, relative to the run folder.
func LogPath(attempt, rank int) string {
	return filepath.Join(LogsDir, fmt.Sprintf("attempt-%d", attempt), fmt.Sprintf("rank-%d.log", rank))
}

// CreateLog creates the log file of a rank in an attempt.
func (r *Run) CreateLog(attempt, rank int) (*os.File, error) {
	p := filepath.Join(r.Dir, LogPath(attempt, rank))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create log of rank %d: %w", rank, err)
	}
	return f, nil
}

// ReadRecord reads the run.json of a run folder without locking it, for those who follow
// a run from outside (the job server, tests).
func ReadRecord(dir string) (Record, error) {
	var rec Record
	data, err := os.ReadFile(filepath.Join(dir, RecordFile))
	if err != nil {
		return rec, fmt.Errorf("read run record: %w", err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("read run record %s: %w", filepath.Join(dir, RecordFile), err)
	}
	return rec, nil
}
