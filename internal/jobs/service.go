package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/preempt"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/secrets"
	"github.com/trainyard/trainyard/internal/shell"
	"github.com/trainyard/trainyard/internal/store"
)

// Errors callers branch on (the HTTP layer maps them to status codes).
var (
	// ErrNeverFits: the job can never run on this machine.
	ErrNeverFits = errors.New("the job can never run on this machine")
	// ErrNotFinished: the job is pending or running (delete refuses it).
	ErrNotFinished = errors.New("the job has not finished")
	// ErrFinished: the job already ended (stop has nothing to do).
	ErrFinished = errors.New("the job already finished")
)

// Config is what a Service needs.
type Config struct {
	Store *store.Store
	// Node is what this machine offers to jobs.
	Node scheduler.Node
	// StateDir holds the submitted specs (StateDir/specs/<id>.yaml).
	StateDir string
	// Binary is the trainyard executable that supervises each job (`trainyard run`).
	Binary string
	Logger *slog.Logger
	// Poll is how often running supervisors are checked; 0 means 500 ms.
	Poll time.Duration
	// LeaseKey signs each job's secret for GPU leases (see ServeLeases and package
	// gpulease); when set, every supervisor gets the lease environment.
	LeaseKey []byte
	// LeaseSocket is the path ServeLeases listens on, given to supervisors.
	LeaseSocket string
	// Preemption says whether a pending job of higher priority may preempt running jobs
	// (see preempt.go); the zero value never preempts.
	Preemption scheduler.PreemptionPolicy
	// ElasticSettle is how long an elastic gang that fits with fewer than its most
	// workers (at least spec.minWorkers) waits for more room before it starts with what
	// fits (see resize.go); 0 starts it at once.
	ElasticSettle time.Duration
	// Prestart keeps the next job's Pythons warm: after starting a job, the server starts
	// a standby shaped like it, whose Pythons the next job's ranks run on (warm.go).
	Prestart bool
	// PrestartShapes is how many standbys, each of another shape (the most recent jobs'),
	// may wait at once with Prestart; 0 means 1.
	PrestartShapes int
	// Deleted, when set, is called with the ID of a job about to be deleted, to delete
	// what it made elsewhere (an in-cluster server's gangs' TrainJobs); an error keeps
	// the job.
	Deleted func(id string) error
}

// Service runs jobs on this machine. Its methods are safe for concurrent use.
type Service struct {
	cfg   Config
	log   *slog.Logger
	wake  chan struct{}
	exits chan exited

	submitMu sync.Mutex // serializes the creation of jobs (see create)
	mu       sync.Mutex
	children map[string]bool // jobs whose supervisor is this process's child, or being started
	leases   leases
	standbys []*standby // the standbys waiting for a job of their shape, oldest first (warm.go)
	stopped  bool       // Run returned: no more standbys

	crash func(point string) // the test fault hook (see FaultEnv); nil in production
}

// New returns a Service; Run starts its work.
func New(cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	for _, sub := range []string{"specs", "secrets"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("create state folder: %w", err)
		}
	}
	crash, err := faultFromEnv(cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), exits: make(chan exited, 64),
		children: map[string]bool{}, leases: leases{waiters: map[string]*leaseWaiter{}}, crash: crash}, nil
}

// Submission is a job to submit.
type Submission struct {
	// ID is the submission id; empty generates one ("raysubmit_..." like Ray's).
	ID string
	// Job is defaulted and validated (jobspec). Its run name becomes FolderName(ID).
	Job        *v1.TrainJob
	Priority   int
	Entrypoint string
	// SubmittedBy says who submitted the job (see store.Job).
	SubmittedBy string
	Metadata    map[string]string
	RuntimeEnv  json.RawMessage
}

// Submit stores a job as pending and wakes the scheduler. A job without a CPU request
// gets its default share (DefaultCPU) in its stored spec. A job that can never fit on
// this machine is refused (ErrNeverFits), a duplicate ID too (store.ErrExists), a job
// whose spec its supervisor could not read (ErrSpecTooLarge), and a name that another
// job has (*store.NameTakenError): names are unique until deleted.
//
// The job's secret variables (package secrets) are taken out of its spec and kept in a
// file of their own, StateDir/secrets/<job>, 0600, written before the job is stored;
// its Ray runtime_env keeps their names with the values redacted.
func (s *Service) Submit(sub Submission) (*store.Job, error) {
	if sub.ID == "" {
		sub.ID = NewID()
	}
	defaultCPU(s.cfg.Node, sub.Job)
	least := schedJob(sub.ID, sub.Priority, 0, sub.Job)
	if least.Elastic() {
		least.Workers = least.MinWorkers // the gang runs with what fits, at least that many
	}
	if err := scheduler.CheckFits(s.cfg.Node, least); err != nil {
		if least.MinWorkers > 0 && least.MinWorkers < sub.Job.Spec.WorkerCount() {
			err = fmt.Errorf("even with its fewest workers (%d): %w", least.Workers, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrNeverFits, err)
	}
	sub.Job.Spec.RunName = FolderName(sub.ID)
	hidden := secrets.Take(&sub.Job.Spec.Env)
	sub.RuntimeEnv = secrets.RedactRuntimeEnv(sub.RuntimeEnv)
	if sub.Entrypoint == "" {
		sub.Entrypoint = shell.Join(append(slices.Clone(sub.Job.Spec.Command), sub.Job.Spec.Args...))
	}
	spec, err := json.Marshal(sub.Job)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	if err := s.checkSpecSize(sub.ID, sub.Job); err != nil {
		return nil, err
	}
	j := &store.Job{ID: sub.ID, Name: sub.Job.Name, Status: store.Pending, Priority: sub.Priority,
		Entrypoint: sub.Entrypoint, SubmittedBy: sub.SubmittedBy, Spec: spec, Metadata: sub.Metadata, RuntimeEnv: sub.RuntimeEnv,
		RunDir: jobspec.RunFolder(&sub.Job.Spec), SubmittedAt: time.Now(),
		SecretEnv: secrets.Names(hidden)}
	if err := s.create(j, hidden); err != nil {
		return nil, err
	}
	s.poke()
	return j, nil
}

// Get returns a job.
func (s *Service) Get(id string) (*store.Job, error) { return s.cfg.Store.Get(id) }

// List returns jobs in submit order.
func (s *Service) List(f store.Filter) ([]*store.Job, error) { return s.cfg.Store.List(f) }

// Count returns how many jobs f selects, its Limit aside.
func (s *Service) Count(f store.Filter) (int, error) { return s.cfg.Store.Count(f) }

// Stop stops a job: a pending one at once, a running one by SIGTERM to its supervisor,
// which stops the gang (the job becomes STOPPED when it has). A stop wins over a
// preemption: the job is not queued again; a supervisor already told to stop by the
// preemption is not signalled again by the first stop (a second SIGTERM would end the
// grace period its ranks have to save a checkpoint), but by a second one. A finished job
// gives ErrFinished.
func (s *Service) Stop(id string) (*store.Job, error) {
	stopping := false // the supervisor got SIGTERM from a preemption, and no stop was asked yet
	j, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		switch {
		case j.Status.Terminal():
			return fmt.Errorf("job %s is %s: %w", id, j.Status, ErrFinished)
		case j.Status == store.Pending:
			now := time.Now()
			j.Status, j.Message, j.EndedAt = store.Stopped, "stopped before it started", &now
		default:
			stopping = j.Preempting() && j.Preemption.Signalled && !j.StopRequested
			j.StopRequested = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if j.Status == store.Running && !stopping {
		s.signal(j)
	}
	s.poke()
	return j, nil
}

// Delete removes a finished job's record and spec; its run folder (logs, results,
// checkpoints) stays. A pending or running job gives ErrNotFinished.
func (s *Service) Delete(id string) error {
	j, err := s.cfg.Store.Get(id)
	if err != nil {
		return err
	}
	if !j.Status.Terminal() {
		return fmt.Errorf("job %s is %s; stop it first: %w", id, j.Status, ErrNotFinished)
	}
	if s.cfg.Deleted != nil {
		if err := s.cfg.Deleted(id); err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
	}
	if err := s.cfg.Store.Delete(id); err != nil {
		return err
	}
	_ = os.Remove(s.specPath(id))
	_ = os.Remove(s.secretsPath(id))
	_ = os.Remove(s.stopReasonPath(id))
	_ = os.Remove(s.resizePath(id))
	return nil
}

// LogPath is the file holding a job's console output (what its supervisor printed).
func LogPath(j *store.Job) string { return filepath.Join(j.RunDir, ConsoleLog) }

// ConsoleLog is the name of a job's console log in its run folder.
const ConsoleLog = "console.log"

// Run re-attaches to the supervisors of running jobs, then schedules and follows jobs
// until ctx ends. Supervisors keep running when it returns.
func (s *Service) Run(ctx context.Context) error {
	if err := s.reattach(); err != nil {
		return err
	}
	defer s.stopWarm()
	if s.cfg.LeaseSocket != "" {
		stop, err := s.serveLeases(ctx, s.cfg.LeaseSocket)
		if err != nil {
			return err
		}
		defer stop()
	}
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		s.reconcile()
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-tick.C:
		case e := <-s.exits:
			s.settle(e.id, e.err)
		}
	}
}

// poke wakes Run without blocking.
func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// specPath returns the path of the spec file of the job with that ID.
func (s *Service) specPath(id string) string {
	return filepath.Join(s.cfg.StateDir, "specs", FolderName(id)+".yaml")
}

// create writes the job's secrets, then stores the job. Submissions are serialized here,
// so that a second submission of an ID never replaces the secrets of the job that has it;
// a secrets file without its job (a crash between the two steps) is replaced.
func (s *Service) create(j *store.Job, hidden []v1.EnvVar) error {
	s.submitMu.Lock()
	defer s.submitMu.Unlock()
	if _, err := s.cfg.Store.Get(j.ID); err == nil {
		return fmt.Errorf("job %s: %w", j.ID, store.ErrExists)
	}
	if err := secrets.WriteFile(s.secretsPath(j.ID), hidden); err != nil {
		return err
	}
	if err := s.cfg.Store.CreateUnique(j); err != nil {
		_ = os.Remove(s.secretsPath(j.ID))
		return err
	}
	return nil
}

// stopReasonPath returns the path of the file where the server says why it stops the job
// with that ID (preempt.EnvReason), beside its secrets.
func (s *Service) stopReasonPath(id string) string {
	return filepath.Join(s.cfg.StateDir, "secrets", FolderName(id)+".stop")
}

// tellWhy writes why the job's supervisor is about to get SIGTERM, for its ranks'
// preemption notice; failing to is only logged (the notice then says SIGTERM).
func (s *Service) tellWhy(id, why string) {
	if err := preempt.WriteReason(s.stopReasonPath(id), why); err != nil {
		s.log.Warn("write why a job stops", "job", id, "err", err)
	}
}

// secretsPath returns the path of the file of the secrets of the job with that ID.
func (s *Service) secretsPath(id string) string {
	return filepath.Join(s.cfg.StateDir, "secrets", FolderName(id)+".yaml")
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// NewID returns a new submission id in Ray's form, "raysubmit_" and 16 letters or digits.
func NewID() string {
	b := make([]byte, 16)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(idChars))))
		b[i] = idChars[n.Int64()]
	}
	return "raysubmit_" + string(b)
}
