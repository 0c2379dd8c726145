package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is a job's state, named as Ray's Jobs API names them.
type Status string

// The statuses of a job. A job starts Pending and ends in one of the terminal statuses
// (Stopped, Succeeded, Failed); see Status.Terminal.
const (
	// Pending: submitted, waiting for resources or for its supervisor to start.
	Pending Status = "PENDING"
	// Running: the job is placed (its GPUs are recorded) and its supervisor runs the gang,
	// or is being started (SupervisorPID 0).
	Running Status = "RUNNING"
	// Stopped: stopped by a user.
	Stopped Status = "STOPPED"
	// Succeeded: every worker exited with status 0.
	Succeeded Status = "SUCCEEDED"
	// Failed: the job failed and will not be restarted.
	Failed Status = "FAILED"
)

// statuses returns every Status, in the order Counts and List use.
func statuses() []Status {
	return []Status{Pending, Running, Stopped, Succeeded, Failed}
}

// Terminal reports whether s is a final status: Stopped, Succeeded or Failed.
func (s Status) Terminal() bool {
	return s == Stopped || s == Succeeded || s == Failed
}

// Known reports whether s is one of the statuses above.
func (s Status) Known() bool {
	switch s {
	case Pending, Running, Stopped, Succeeded, Failed:
		return true
	}
	return false
}

// Job is what the server keeps of a job. The zero value is not a valid job: ID and Spec
// are required.
type Job struct {
	// ID is the submission id; unique in the store and never changed.
	ID string `json:"id"`
	// Seq is the submit order, assigned by Create and never changed.
	Seq uint64 `json:"seq"`
	// Name is the job's display name.
	Name string `json:"name,omitempty"`
	// Status is the job's state; Create treats "" as Pending.
	Status Status `json:"status"`
	// Message says why the job is in its status: the waiting reason, the failure reason.
	Message string `json:"message,omitempty"`
	// Priority orders pending jobs: higher first (the scheduler's concern, not the store's).
	Priority int `json:"priority"`
	// Entrypoint is the command line a Ray Jobs API client submitted, if any.
	Entrypoint string `json:"entrypoint,omitempty"`
	// SubmittedBy says who submitted the job, as far as the server can tell: the user
	// and host the client names (not authenticated: every client holds the same token)
	// and the address the request came from.
	SubmittedBy string `json:"submittedBy,omitempty"`
	// Spec is the resolved TrainJob as JSON; the store keeps it without interpreting it.
	Spec json.RawMessage `json:"spec"`
	// Metadata is the client's key-value metadata (Ray's job metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// RuntimeEnv is the client's runtime environment (Ray's runtime_env) as JSON, its
	// secret env_vars redacted.
	RuntimeEnv json.RawMessage `json:"runtimeEnv,omitempty"`
	// SecretEnv names the job's secret variables, kept apart from its spec (package
	// secrets); never their values.
	SecretEnv []string `json:"secretEnv,omitempty"`
	// GPUs are the GPU indices allocated to the job, one list per worker.
	GPUs [][]int `json:"gpus,omitempty"`
	// Gang is the GPU lease a running job's own process asked for to start a gang of
	// its own (a Ray Train driver's fit()), nil when it holds or awaits none.
	Gang *Gang `json:"gang,omitempty"`
	// RunDir is the job's run folder.
	RunDir string `json:"runDir,omitempty"`
	// SupervisorPID is the process id of the job's supervisor while it runs; 0 while the
	// job is placed (Running, with its GPUs) but its supervisor's start is not recorded yet.
	SupervisorPID int `json:"supervisorPID,omitempty"`
	// Restarts is how many of the job's restarts (its spec's maxRestarts) were used before
	// its current supervisor started: the server counts one each time it queues the job
	// again after its supervisor died, and takes the restarts of earlier supervisors from
	// the run's record (see internal/jobs). 0 for a job never restarted by the server.
	Restarts int `json:"restarts,omitempty"`
	// Preemption is the job's latest preemption by the server (to make room for a job of
	// higher priority), nil if it was never preempted. It is recorded before the job's
	// supervisor is told to stop, and kept once the job is queued again.
	Preemption *Preemption `json:"preemption,omitempty"`
	// Preemptions counts the times the server preempted the job and queued it again to
	// resume from its latest checkpoint. They use none of its restarts.
	Preemptions int `json:"preemptions,omitempty"`
	// Resize is the resize of a running elastic gang under way (see Resize); nil when
	// none. Resizes counts those done; like preemptions, they use no restart.
	Resize  *Resize `json:"resize,omitempty"`
	Resizes int     `json:"resizes,omitempty"`
	// StopRequested is set when a user asked to stop the job and it has not stopped yet.
	StopRequested bool `json:"stopRequested,omitempty"`
	// SubmittedAt is when the job was submitted.
	SubmittedAt time.Time `json:"submittedAt"`
	// StartedAt is when the job's supervisor started, nil before.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// EndedAt is when the job reached a terminal status, nil before.
	EndedAt *time.Time `json:"endedAt,omitempty"`
	// ExitCode is the exit code of the job's entrypoint (rank 0 of its last attempt) once
	// the job has ended, nil while it runs, when rank 0 did not exit by itself (a signal)
	// or never started, and for jobs that ended before trainyard recorded it.
	ExitCode *int `json:"exitCode,omitempty"`
	// Version is 1 after Create and incremented by every Update, so a client can tell
	// whether the job changed since it read it (optimistic concurrency).
	Version uint64 `json:"version"`
}

// Preemption is the server's decision to stop a running job to make room for another of
// higher priority, and how far it went.
type Preemption struct {
	// For is the ID of the job it makes room for, ForName what messages call it (its
	// name, or "" for the ID); ForPriority is that job's priority.
	For         string `json:"for"`
	ForName     string `json:"forName,omitempty"`
	ForPriority int    `json:"forPriority"`
	// At is when the server decided it.
	At time.Time `json:"at"`
	// Signalled is set once the job's supervisor was sent SIGTERM (sent once: a second
	// one would stop the gang at once, without the grace period to save a checkpoint).
	Signalled bool `json:"signalled,omitempty"`
	// Requeued is when the job went back to the queue, nil while it stops (or if it
	// finished, or was stopped by a user, meanwhile).
	Requeued *time.Time `json:"requeued,omitempty"`
	// Resumed is when the job started again after it was requeued, nil before.
	Resumed *time.Time `json:"resumed,omitempty"`
}

// Preempting reports whether the job runs but the server preempted it: its supervisor
// stops it (or is told to), and it has not ended yet.
func (j *Job) Preempting() bool {
	return j.Status == Running && j.Preemption != nil && j.Preemption.Requeued == nil
}

// Resize is a running elastic gang's change of size that the server decided and
// recorded before telling its supervisor (intent first). A grow's GPUs are the job's
// from the record on (Job.GPUs has them); a shrink's job keeps all its GPUs until its
// supervisor runs the gang at the new size, when Job.GPUs becomes GPUs.
type Resize struct {
	// From and To are the numbers of workers before and after.
	From int `json:"from"`
	To   int `json:"to"`
	// GPUs are each worker's GPU indices after the resize.
	GPUs [][]int `json:"gpus"`
	// Reason says why ("GPUs 2,3 free"); For is the ID of the job a shrink makes room
	// for, ForName what messages call it.
	Reason  string `json:"reason"`
	For     string `json:"for,omitempty"`
	ForName string `json:"forName,omitempty"`
	// At is when it was decided, and Seq tells the request apart in the supervisor's
	// request file.
	At  time.Time `json:"at"`
	Seq int64     `json:"seq"`
	// Told is set once the supervisor's request file was written.
	Told bool `json:"told,omitempty"`
}

// Gang is a running job's lease of resources for a gang its process starts (a `trainyard
// run --workers N --gpus-per-worker G` inside the job), held apart from the job's own GPUs;
// while it is held or awaited, the job's own CPU and memory are lent to it, up to what the
// gang asks for (DriverHolds).
type Gang struct {
	// Workers, GPUsPerWorker, MilliCPUPerWorker and MemoryBytesPerWorker are what the gang
	// asks for.
	Workers              int   `json:"workers"`
	GPUsPerWorker        int   `json:"gpusPerWorker"`
	MilliCPUPerWorker    int64 `json:"milliCPUPerWorker,omitempty"`
	MemoryBytesPerWorker int64 `json:"memoryBytesPerWorker,omitempty"`
	// GPUs are the indices granted, one list per worker (empty for a gang on CPUs); nil
	// while the lease waits.
	GPUs [][]int `json:"gpus,omitempty"`
	// RequestedAt is when the lease was asked for.
	RequestedAt time.Time `json:"requestedAt"`
}

// DriverHolds returns what a job whose process asked for this gang still holds of its own
// CPU and memory (milliCPU and memory, all its workers'): its own less what it lends the
// gang, which is at most what the gang asks for. So a job holds at least its own in all,
// and a gang that asks for no CPU frees none of the job's.
func (g *Gang) DriverHolds(milliCPU, memory int64) (int64, int64) {
	n := int64(g.Workers)
	return max(0, milliCPU-n*g.MilliCPUPerWorker), max(0, memory-n*g.MemoryBytesPerWorker)
}

// validate checks what the store relies on: an ID, a known status, and JSON in Spec (and
// RuntimeEnv, if set), which the store keeps as given.
func (j *Job) validate() error {
	if j.ID == "" {
		return fmt.Errorf("job has no ID: %w", ErrInvalid)
	}
	if !j.Status.Known() {
		return fmt.Errorf("job %q: unknown status %q: %w", j.ID, j.Status, ErrInvalid)
	}
	if !json.Valid(j.Spec) {
		return fmt.Errorf("job %q: spec is not JSON: %w", j.ID, ErrInvalid)
	}
	if len(j.RuntimeEnv) > 0 && !json.Valid(j.RuntimeEnv) {
		return fmt.Errorf("job %q: runtime env is not JSON: %w", j.ID, ErrInvalid)
	}
	return nil
}
