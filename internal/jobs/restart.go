package jobs

import (
	"errors"
	"fmt"
	"os/exec"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// ended records in j how its supervisor's end leaves the running job. A supervisor that
// wrote a final phase to run.json decides it, and a job a user asked to stop is stopped.
// A job the server preempted is queued again, to resume in the same run folder from its
// latest checkpoint, using no restart (preempt.go). A supervisor that ended without any
// of these (killed with SIGKILL, interrupted, gone with the machine) leaves a job that is
// queued again, to resume the same way, while it has restarts left, as the supervisor
// itself would have restarted a failed gang; with none left, the job fails.
func ended(j *store.Job, waitErr error, now time.Time) {
	rec, err := rundir.ReadRecord(j.RunDir)
	if err != nil {
		rec = rundir.Record{} // no attempt recorded: the supervisor died before its first
	}
	j.Gang = nil   // the gang ended with its job's supervisor
	j.Resize = nil // and so did its resize, if one was under way
	if requeuePreempted(j, rec, now) {
		return
	}
	died := diedUnfinished(j, rec, waitErr)
	limit, used := maxRestarts(j), restartsUsed(j, rec)
	if died && used < limit {
		j.Message = fmt.Sprintf("its supervisor (pid %d) %s; restarting from its latest checkpoint (restart %d of %d)",
			j.SupervisorPID, howEnded(rec, waitErr), used+1, limit)
		j.Status, j.Restarts, j.SupervisorPID, j.GPUs, j.StartedAt = store.Pending, used+1, 0, nil, nil
		return
	}
	j.Status, j.Message = outcome(j, rec, waitErr)
	if died && limit > 0 {
		j.Message += fmt.Sprintf("; no restarts left (max restarts %d)", limit)
	}
	j.EndedAt, j.SupervisorPID, j.ExitCode = &now, 0, rec.DriverExitCode()
}

// diedUnfinished reports whether the supervisor ended without finishing the job: no final
// phase in its record, no stop asked by a user, and not a supervisor that exited by itself
// with an error status (a bad spec, a run folder it could not open), which a restart would
// not mend. A supervisor this process did not wait for (waitErr nil) is one that died
// while no server watched it, or with the machine.
func diedUnfinished(j *store.Job, rec rundir.Record, waitErr error) bool {
	if j.StopRequested || rec.Phase.Finished() {
		return false
	}
	var exit *exec.ExitError
	return !errors.As(waitErr, &exit) || !exit.Exited()
}

// howEnded says how a supervisor that died unfinished ended, for the job's message.
func howEnded(rec rundir.Record, waitErr error) string {
	how := "died"
	if rec.Phase == v1.PhaseInterrupted {
		how = "was interrupted"
	}
	if waitErr != nil {
		how += " (" + waitErr.Error() + ")"
	}
	return how
}

// maxRestarts is the job's restart budget: its spec's maxRestarts (0 when the spec does
// not decode).
func maxRestarts(j *store.Job) int {
	spec, err := decodeSpec(j)
	if err != nil {
		return 0
	}
	return int(spec.Spec.MaxRestarts)
}

// restartsUsed is how many restarts the job has used: the restarts its supervisors made
// (see restartsIn) or, when more, those counted by the server (a supervisor that died
// before its first attempt made none).
func restartsUsed(j *store.Job, rec rundir.Record) int {
	return max(j.Restarts, restartsIn(rec))
}

// outcomeInterrupted is the outcome run.json gives an attempt that a stop ended
// (launcher.Interrupted): a preemption, or a signal to the supervisor.
const outcomeInterrupted = "interrupted"

// restartsIn counts the restarts in a run's record: every attempt after the first, but
// those that resume an interrupted attempt (after a preemption), which are no restarts.
func restartsIn(rec rundir.Record) int {
	n := 0
	for i := 1; i < len(rec.Attempts); i++ {
		if rec.Attempts[i-1].Outcome != outcomeInterrupted {
			n++
		}
	}
	return n
}
