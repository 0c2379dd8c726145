package jobs

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// Preemption: when the scheduler says that a running job must make room for the head of
// the queue (Decision.Preempt, with Config.Preemption lower-priority), the server records
// the preemption in the job (intent first), then sends its supervisor SIGTERM, once, and
// records that it did. The supervisor's launcher gives the ranks the preemption notice and
// the job's grace period to commit a checkpoint, then stops the gang. When the supervisor
// has ended, ended (restart.go) queues the job again, to resume in the same run folder
// from its latest checkpoint, counting a preemption, not a restart. A job that finished
// meanwhile keeps its outcome, and a stop asked by a user wins. A server that dies
// between recording a preemption and signalling signals when it starts again
// (passOnStop); one whose job's supervisor never started queues the job again at once
// (recoverJob). While the preempted job stops it still holds its resources; the
// scheduler counts it as going away (Running.Preempting) and keeps what it frees for
// the head.

// errNotPreemptible aborts recording a preemption: the job is no longer running, a user
// asked to stop it, or it is being preempted already (a job and its gang both chosen).
var errNotPreemptible = errors.New("the job is no longer preemptible")

// preempt records that the running job id is preempted as p says, for the job forID (a
// pending job, or the owner of a gang), then tells its supervisor to stop.
func (s *Service) preempt(id, forID string, p scheduler.Preemption) {
	now := time.Now()
	j, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status != store.Running || j.StopRequested || j.Preempting() {
			return errNotPreemptible
		}
		j.Preemption = &store.Preemption{For: forID, ForName: p.ForName, ForPriority: p.ForPriority, At: now}
		j.Message = p.Reason + "; stopping, to go back to the queue and resume from its latest checkpoint"
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNotPreemptible) && !errors.Is(err, store.ErrNotFound) {
			s.log.Error("record a preemption", "job", id, "err", err)
		}
		return
	}
	s.log.Info("preempting a job", "job", id, "priority", j.Priority, "for", forID, "forPriority", p.ForPriority)
	s.tellWhy(id, fmt.Sprintf("preempted by job %s (priority %d)", cmp.Or(p.ForName, forID), p.ForPriority))
	s.fault(FaultAfterPreemptRecord)
	s.tellPreempted(j)
}

// tellPreempted sends SIGTERM to the supervisor of a job being preempted and records that
// it did. A job whose supervisor is not recorded yet is told once it is (supervise).
func (s *Service) tellPreempted(j *store.Job) {
	if s.signal(j) {
		s.signalled(j.ID)
	}
}

// signalled records that a preempted job's supervisor was sent SIGTERM.
func (s *Service) signalled(id string) {
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Preempting() {
			j.Preemption.Signalled = true
		}
		return nil
	})
	if err != nil {
		s.log.Warn("record that a preempted job's supervisor was told to stop", "job", id, "err", err)
	}
}

// requeuePreempted queues again a job that the server preempted and whose supervisor
// ended without a final phase, and reports whether it did: the job resumes from its
// latest checkpoint in the same run folder. It uses no restart (the restarts its
// supervisors made are kept), and counts a preemption. A job that finished meanwhile, or
// that a user asked to stop, is not queued again.
func requeuePreempted(j *store.Job, rec rundir.Record, now time.Time) bool {
	if !j.Preempting() || j.StopRequested || rec.Phase.Finished() {
		return false
	}
	j.Restarts = restartsUsed(j, rec)
	j.Preemptions++
	j.Preemption.Requeued = &now
	j.Message = requeuedMessage(j)
	j.Status, j.SupervisorPID, j.GPUs, j.StartedAt = store.Pending, 0, nil, nil
	return true
}

// requeuedMessage says that a job was preempted and queued again: "preempted by job hi
// (priority 5); requeued, resumes from its latest checkpoint (preemption 1)".
func requeuedMessage(j *store.Job) string {
	return fmt.Sprintf("preempted by job %s (priority %d); requeued, resumes from its latest checkpoint (preemption %d)",
		cmp.Or(j.Preemption.ForName, j.Preemption.For), j.Preemption.ForPriority, j.Preemptions)
}

// waitingMessage is the message of a pending job that waits for the reason: the reason,
// after what requeued it when a preemption did and it has not started since.
func waitingMessage(j *store.Job, reason string) string {
	if p := j.Preemption; p != nil && p.Requeued != nil && p.Resumed == nil {
		return requeuedMessage(j) + "; " + reason
	}
	return reason
}
