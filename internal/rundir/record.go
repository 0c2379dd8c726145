package rundir

import (
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Record is the content of run.json: what happened to a run, written after every change.
type Record struct {
	Name       string      `json:"name"`
	Phase      v1.JobPhase `json:"phase"`
	Reason     string      `json:"reason,omitempty"`
	Supervisor int         `json:"supervisorPID,omitempty"`
	// Host is the machine the supervisor runs on (see Observe).
	Host     string     `json:"host,omitempty"`
	Created  time.Time  `json:"created"`
	Updated  time.Time  `json:"updated"`
	Finished *time.Time `json:"finished,omitempty"`
	Attempts []Attempt  `json:"attempts"`
	// Preemptions counts the times the run was stopped by a preemption (a signal to its
	// launcher, the job server making room): each ended the run interrupted, and the run
	// continued from its latest checkpoint when it was started again. They are not
	// failures: they use no restart.
	Preemptions int `json:"preemptions,omitempty"`
	// SourceCommit is the commit of the job's git source cloned into code/.
	SourceCommit string `json:"sourceCommit,omitempty"`
}

// Attempt is one start of the whole gang.
type Attempt struct {
	Number     int        `json:"number"`
	MasterAddr string     `json:"masterAddr"`
	MasterPort int        `json:"masterPort"`
	Started    time.Time  `json:"started"`
	Ended      *time.Time `json:"ended,omitempty"`
	// Workers is the gang's number of workers in this attempt (an elastic gang's
	// changes); 0 in records written before it was kept.
	Workers int `json:"workers,omitempty"`
	// Outcome is "succeeded", "failed" or "interrupted" once the attempt ended.
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Ranks   []Rank `json:"ranks"`
}

// Rank is one worker process of an attempt.
type Rank struct {
	Rank      int        `json:"rank"`
	Worker    int        `json:"worker"`
	LocalRank int        `json:"localRank"`
	PID       int        `json:"pid,omitempty"`
	GPUs      string     `json:"gpus,omitempty"`
	Log       string     `json:"log"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended,omitempty"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	// StoppedByTrainyard is set for ranks that Trainyard stopped because another rank
	// failed or the run was interrupted.
	StoppedByTrainyard bool `json:"stoppedByTrainyard,omitempty"`
	// Prestarted is set for a rank that ran on a Python the launcher had started ahead,
	// with torch imported (a restart's spare).
	Prestarted bool   `json:"prestarted,omitempty"`
	Error      string `json:"error,omitempty"`
}

// DriverExitCode returns the exit code of rank 0 in the last attempt, the process that runs
// a Ray job's entrypoint, if it exited.
func (r *Record) DriverExitCode() *int {
	if len(r.Attempts) == 0 {
		return nil
	}
	for _, rk := range r.Attempts[len(r.Attempts)-1].Ranks {
		if rk.Rank == 0 {
			return rk.ExitCode
		}
	}
	return nil
}

// Restarts counts the attempts that followed a failed one: the run's restarts, not the
// starts that continued it after an interruption, a preemption or a resize.
func (r *Record) Restarts() int {
	n := 0
	for i := 1; i < len(r.Attempts); i++ {
		if r.Attempts[i-1].Outcome == "failed" {
			n++
		}
	}
	return n
}

// RunningTime returns how long the run's attempts ran, summed: an attempt that has not
// ended counts until now while the run is active, else until the record's last update
// (its launcher died). The time a run waited between a stop and its continuation is not
// counted.
func (r *Record) RunningTime(now time.Time) time.Duration {
	var d time.Duration
	for _, a := range r.Attempts {
		end := now
		switch {
		case a.Ended != nil:
			end = *a.Ended
		case !r.Phase.Active():
			end = r.Updated
		}
		if end.After(a.Started) {
			d += end.Sub(a.Started)
		}
	}
	return d
}
