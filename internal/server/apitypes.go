package server

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/ganglease"
)

// The native API's wire types (/api/v1/). They are apart from the store's and the run
// folder's types, which may change without breaking clients; convert.go converts them, in
// one place. A Go client of the API reuses them.

// JobStatus is a job's state, named as Ray's Jobs API names them.
type JobStatus string

// The statuses of a job. A job starts Pending and ends Stopped, Succeeded or Failed.
const (
	StatusPending   JobStatus = "PENDING"
	StatusRunning   JobStatus = "RUNNING"
	StatusStopped   JobStatus = "STOPPED"
	StatusSucceeded JobStatus = "SUCCEEDED"
	StatusFailed    JobStatus = "FAILED"
)

// SubmitRequest is the JSON body of POST /api/v1/jobs.
type SubmitRequest struct {
	// ID is the job's ID; empty lets the server choose one ("raysubmit_...").
	ID string `json:"id,omitempty"`
	// Job is the TrainJob to run, as in a job file: apiVersion, kind and spec required.
	Job *v1.TrainJob `json:"job"`
	// Priority orders pending jobs: higher first. The zero value is the default.
	Priority int `json:"priority,omitempty"`
	// WorkingDirPackage names a package uploaded to this server (PUT
	// /api/packages/gcs/_ray_pkg_<hash>.zip), as "gcs://_ray_pkg_<hash>.zip": the server
	// unpacks it into a folder of the job's own, where the job starts. The job's
	// spec.workingDir must then be empty.
	WorkingDirPackage string `json:"workingDirPackage,omitempty"`
}

// Job is a job as the server keeps it. POST /api/v1/jobs (201) and POST
// /api/v1/jobs/{id}/stop answer one.
type Job struct {
	ID     string    `json:"id"`
	Name   string    `json:"name,omitempty"`
	Status JobStatus `json:"status"`
	// Message says why the job is in its status: the waiting reason, the failure reason.
	Message    string            `json:"message,omitempty"`
	Priority   int               `json:"priority"`
	Entrypoint string            `json:"entrypoint,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// SubmittedBy is the user and host the submitting client named (not authenticated)
	// and the address it submitted from.
	SubmittedBy string `json:"submittedBy,omitempty"`
	// RuntimeEnv is the runtime_env a Ray client submitted, if any, the values of its secret
	// env_vars redacted.
	RuntimeEnv json.RawMessage `json:"runtimeEnv,omitempty"`
	// SecretEnv names the job's secret variables, which the server keeps apart from its
	// spec and never shows.
	SecretEnv []string `json:"secretEnv,omitempty"`
	// Workers is the number of workers in the job's gang: for an elastic gang that runs,
	// those it runs with (its placement), else its most.
	Workers int `json:"workers,omitempty"`
	// MinWorkers and MaxWorkers are an elastic gang's fewest and most workers
	// (--workers MIN:MAX); 0 for a gang that is not elastic.
	MinWorkers int `json:"minWorkers,omitempty"`
	MaxWorkers int `json:"maxWorkers,omitempty"`
	// Resizes counts the times the server resized the running elastic gang (grew it into
	// free room, or shrank it to make room); they use no restart.
	Resizes int `json:"resizes,omitempty"`
	// Resizing is the resize under way, nil when none.
	Resizing *Resizing `json:"resizing,omitempty"`
	// Resources is what each worker asks for and holds while the job runs: GPUs, CPU (a
	// default share when the job named none) and memory, as in the job's spec.
	Resources *v1.WorkerResources `json:"resources,omitempty"`
	// GPUs are the GPU indices allocated to the job, one list per worker.
	GPUs [][]int `json:"gpus,omitempty"`
	// Gang is the gang a running job's own process leased GPUs for (a Ray Train
	// driver's fit()), apart from the job's own GPUs; nil when it holds or awaits none.
	Gang *Gang `json:"gang,omitempty"`
	// RunDir is the job's run folder on the server's machine.
	RunDir string `json:"runDir,omitempty"`
	// Restarts is how many of the job's restarts (its spec's maxRestarts) its earlier
	// supervisors used; a running supervisor's own are in its run's attempts.
	Restarts int `json:"restarts,omitempty"`
	// Preemptions counts the times the server preempted the job to make room for a job of
	// higher priority and queued it again, to resume from its latest checkpoint; they use
	// no restart.
	Preemptions int `json:"preemptions,omitempty"`
	// Preempting is set while the job runs but was preempted: its gang is stopping (with
	// its grace period to save a checkpoint), and it goes back to the queue.
	Preempting bool `json:"preempting,omitempty"`
	// Preemption is the job's latest preemption, nil if it was never preempted.
	Preemption *Preemption `json:"preemption,omitempty"`
	// StopRequested is set when a stop was asked and the job has not stopped yet.
	StopRequested bool       `json:"stopRequested,omitempty"`
	SubmittedAt   time.Time  `json:"submittedAt"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	EndedAt       *time.Time `json:"endedAt,omitempty"`
	// Version increases with every change of the job.
	Version uint64 `json:"version"`
}

// Resizing is a resize of a running elastic gang the server asked for, not done yet: the
// gang changes size at its next checkpoint (a grow), or saves one at once (a shrink).
type Resizing struct {
	// From and To are the numbers of workers before and after.
	From int `json:"from"`
	To   int `json:"to"`
	// Reason says why: "GPUs 2,3 free", "to make room for job hi (priority 5, higher
	// than 0)".
	Reason string `json:"reason"`
}

// Preemption is the server's decision to stop a running job to make room for a job of
// higher priority, and how far it went.
type Preemption struct {
	// For is the ID of the job it made room for; ForPriority is that job's priority.
	For         string `json:"for"`
	ForPriority int    `json:"forPriority"`
	// At is when the server decided it.
	At time.Time `json:"at"`
	// Requeued is when the job went back to the queue; nil while it stops, or if it
	// finished or was stopped meanwhile.
	Requeued *time.Time `json:"requeued,omitempty"`
	// Resumed is when it started again since, nil before.
	Resumed *time.Time `json:"resumed,omitempty"`
}

// Gang is a running job's lease of resources for a gang its process starts (see package
// ganglease).
type Gang struct {
	Workers              int   `json:"workers"`
	GPUsPerWorker        int   `json:"gpusPerWorker"`
	MilliCPUPerWorker    int64 `json:"milliCPUPerWorker,omitempty"`
	MemoryBytesPerWorker int64 `json:"memoryBytesPerWorker,omitempty"`
	// Granted is set once the server granted the gang its resources; it waits until then.
	Granted bool `json:"granted"`
	// GPUs are the indices granted, one list per worker; empty while the gang waits.
	GPUs [][]int `json:"gpus,omitempty"`
}

// String says what the gang asks for and whether it runs: "2 workers × (1 GPU, 1 CPU),
// running on GPUs 0,1", "2 workers × (1 CPU), waiting".
func (g *Gang) String() string {
	out := ganglease.Request{Workers: g.Workers, GPUsPerWorker: g.GPUsPerWorker, MilliCPUPerWorker: g.MilliCPUPerWorker,
		MemoryBytesPerWorker: g.MemoryBytesPerWorker}.String()
	switch {
	case !g.Granted && len(g.GPUs) == 0: // Granted is new: a server before it sent GPUs only
		return out + ", waiting"
	case g.GPUsPerWorker == 0:
		return out + ", running"
	}
	return out + ", running on GPUs " + ganglease.Visible(g.GPUs)
}

// ResultList is the answer of GET /api/v1/jobs/{id}/results: the job's results in
// order, thinned to the asked maximum (always with the last), and how many there are.
type ResultList struct {
	Results []Result `json:"results"`
	// Total is how many results the job has (after the asked iteration).
	Total int `json:"total"`
}

// Checkpoints is the answer of GET /api/v1/jobs/{id}/checkpoints.
type Checkpoints struct {
	// ScoreMetric is the metric the job's retention ranks checkpoints by, if any.
	ScoreMetric string       `json:"scoreMetric,omitempty"`
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// Checkpoint is one checkpoint a job committed.
type Checkpoint struct {
	Name      string    `json:"name"`
	Iteration int       `json:"iteration"`
	Time      time.Time `json:"time"`
	Metrics   Metrics   `json:"metrics,omitempty"`
	// Score is the value of the job's score metric at this checkpoint, if it has one.
	Score *float64 `json:"score,omitempty"`
	// SizeBytes is the size of its files, for a kept one.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Kept is false for a checkpoint the retention policy has deleted since.
	Kept bool `json:"kept"`
}

// JobList is the answer of GET /api/v1/jobs: jobs in submit order.
type JobList struct {
	Jobs []Job `json:"jobs"`
	// Total is how many jobs match before ?offset and ?limit, when the query pages the
	// list (?q, ?sort or ?offset); otherwise how many are in Jobs.
	Total int `json:"total"`
}

// JobDetail is the answer of GET /api/v1/jobs/{id}: the job and what its run folder says.
type JobDetail struct {
	Job  Job          `json:"job"`
	Spec *v1.TrainJob `json:"spec"`
	// Run is the run's record, once its supervisor has written one.
	Run *Run `json:"run,omitempty"`
	// Results is the last result the job reported, if any.
	Results *Result `json:"results,omitempty"`
	// Checkpoints names the committed checkpoints, oldest first.
	Checkpoints []string `json:"checkpoints,omitempty"`
	// GangRunDir is the run folder of the gang a Ray Train driver in the job launched, whose
	// results and checkpoints Results and Checkpoints are (rundir.GangRun); empty for
	// other jobs.
	GangRunDir string `json:"gangRunDir,omitempty"`
}

// Run is what happened to a job's run: its attempts, each with its ranks.
type Run struct {
	Phase    v1.JobPhase `json:"phase"`
	Reason   string      `json:"reason,omitempty"`
	Created  time.Time   `json:"created"`
	Updated  time.Time   `json:"updated"`
	Finished *time.Time  `json:"finished,omitempty"`
	Attempts []Attempt   `json:"attempts"`
	// SourceCommit is the commit of the job's git source its workers run.
	SourceCommit string `json:"sourceCommit,omitempty"`
}

// Attempt is one start of the whole gang.
type Attempt struct {
	Number     int        `json:"number"`
	MasterAddr string     `json:"masterAddr"`
	MasterPort int        `json:"masterPort"`
	Started    time.Time  `json:"started"`
	Ended      *time.Time `json:"ended,omitempty"`
	// Outcome is "succeeded", "failed" or "interrupted" once the attempt ended.
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Ranks   []Rank `json:"ranks"`
}

// Rank is one worker process of an attempt.
type Rank struct {
	Rank      int    `json:"rank"`
	Worker    int    `json:"worker"`
	LocalRank int    `json:"localRank"`
	PID       int    `json:"pid,omitempty"`
	GPUs      string `json:"gpus,omitempty"`
	// Log is the rank's log file, relative to the run folder.
	Log      string     `json:"log"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended,omitempty"`
	ExitCode *int       `json:"exitCode,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	// StoppedByTrainyard is set for ranks stopped because another failed.
	StoppedByTrainyard bool   `json:"stoppedByTrainyard,omitempty"`
	Error              string `json:"error,omitempty"`
}

// Result is one iteration the job reported (rank 0's report).
type Result struct {
	Iteration     int       `json:"iteration"`
	Timestamp     time.Time `json:"timestamp"`
	TimeThisIterS float64   `json:"timeThisIterS"`
	TimeTotalS    float64   `json:"timeTotalS"`
	Attempt       int       `json:"attempt"`
	Checkpoint    string    `json:"checkpoint,omitempty"`
	Metrics       Metrics   `json:"metrics,omitempty"`
}

// Metrics are reported values by name. NaN and infinities, which JSON numbers cannot
// hold, travel as the strings "NaN", "Inf" and "-Inf".
type Metrics map[string]float64

// MarshalJSON writes the metrics, non-finite values as strings.
func (m Metrics) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch {
		case math.IsNaN(v):
			out[k] = "NaN"
		case math.IsInf(v, 1):
			out[k] = "Inf"
		case math.IsInf(v, -1):
			out[k] = "-Inf"
		default:
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Metrics) UnmarshalJSON(data []byte) error {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = make(Metrics, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case float64:
			(*m)[k] = v
		case string:
			f, ok := map[string]float64{"NaN": math.NaN(), "Inf": math.Inf(1), "-Inf": math.Inf(-1)}[v]
			if !ok {
				return fmt.Errorf("metric %s: %q is not a number", k, v)
			}
			(*m)[k] = f
		default:
			return fmt.Errorf("metric %s: %v is not a number", k, v)
		}
	}
	return nil
}

// Node is the answer of GET /api/v1/node: what this machine offers to jobs, and how much
// of it running jobs hold.
type Node struct {
	GPUs GPUs `json:"gpus"`
	// MilliCPU is CPU in thousandths of a core.
	MilliCPU Amount `json:"milliCPU"`
	// MemoryBytes is memory in bytes.
	MemoryBytes Amount `json:"memoryBytes"`
}

// GPUs counts the machine's GPUs.
type GPUs struct {
	Amount
	// Indices are the NVML indices of the GPUs jobs may use.
	Indices []int `json:"indices"`
	// Utilization is each GPU's current use, when the server can measure it.
	Utilization []GPUUtilization `json:"utilization,omitempty"`
}

// Amount is how much of a resource the machine offers to jobs, how much running jobs
// hold, and the rest.
type Amount struct {
	Total     int64 `json:"total"`
	Allocated int64 `json:"allocated"`
	Free      int64 `json:"free"`
}

// GPUUtilization is one GPU's current use.
type GPUUtilization struct {
	Index int `json:"index"`
	// Percent is the share of the last sample period the GPU was busy, 0 to 100.
	Percent          float64 `json:"percent"`
	MemoryUsedBytes  int64   `json:"memoryUsedBytes"`
	MemoryTotalBytes int64   `json:"memoryTotalBytes"`
}
