package jobs

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/preempt"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/units"
)

// Elastic gangs (spec.minWorkers): the scheduler starts one with as many workers as fit
// (all of them, or at least minWorkers after Config.ElasticSettle), and later grows it
// into room nobody waits for, or shrinks it toward minWorkers to make room for a job of
// higher priority instead of preempting it (Decision.Resize). A resize is recorded in
// the job first (store.Resize; a grow's new GPUs become the job's at once, so nothing
// else is placed on them), then written to the supervisor's request file
// (preempt.EnvResize), which its launcher follows: at the next committed checkpoint or
// the end of the job's resize interval (a grow), or at once with the preemption notice
// (a shrink), it stops the gang and starts it again at the new size, using no restart. When run.json shows an attempt at the new
// size, the resize is done: a shrink's freed GPUs return then. A server that dies
// between the record and the request writes the request when it starts again
// (passOnStop).

// errNotResizable aborts recording a resize: the job is no longer running as the
// scheduler saw it.
var errNotResizable = errors.New("the job is no longer resizable")

// resize records the resize r of the running job and tells its supervisor.
func (s *Service) resize(r scheduler.Resize) {
	now := time.Now()
	j, err := s.cfg.Store.Update(r.JobID, func(j *store.Job) error {
		if j.Status != store.Running || j.StopRequested || j.Preempting() || j.Resize != nil || len(j.GPUs) != r.From {
			return errNotResizable
		}
		j.Resize = &store.Resize{From: r.From, To: r.To, GPUs: r.GPUs, Reason: r.Reason, For: r.For, ForName: r.ForName, At: now, Seq: now.UnixNano()}
		if !r.Shrinks() {
			j.GPUs = r.GPUs
		}
		j.Message = fmt.Sprintf("%s from %d to %d workers %s: %s", resizeVerb(r.From, r.To), r.From, r.To, resizeWhen(j, r), r.Reason)
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNotResizable) && !errors.Is(err, store.ErrNotFound) {
			s.log.Error("record a resize", "job", r.JobID, "err", err)
		}
		return
	}
	s.log.Info("resizing an elastic job", "job", j.ID, "from", r.From, "to", r.To, "why", r.Reason)
	s.fault(FaultAfterResizeRecord)
	s.tellResize(j)
}

// resizeWhen says when the gang resizes: a shrink at the checkpoint its ranks save now, a
// grow at its next one or after the job's resize interval (spec.resizeIntervalSeconds).
func resizeWhen(j *store.Job, r scheduler.Resize) string {
	if r.Shrinks() {
		return "at its next checkpoint"
	}
	wait := v1.DefaultResizeInterval
	if spec, err := decodeSpec(j); err == nil {
		wait = spec.Spec.ResizeInterval()
	}
	if wait <= 0 {
		return "now"
	}
	return "at its next checkpoint (within " + units.Duration(wait) + ")"
}

// resizeVerb says "growing" or "shrinking".
func resizeVerb(from, to int) string {
	if to > from {
		return "growing"
	}
	return "shrinking"
}

// tellResize writes the job's resize request for its supervisor and records that it did.
func (s *Service) tellResize(j *store.Job) {
	r := j.Resize
	req := preempt.ResizeRequest{Seq: r.Seq, GPUs: r.GPUs, Reason: r.Reason, Now: r.To < r.From}
	if err := preempt.WriteResize(s.resizePath(j.ID), req); err != nil {
		s.log.Error("write a resize request", "job", j.ID, "err", err)
		return
	}
	_, err := s.cfg.Store.Update(j.ID, func(j *store.Job) error {
		if j.Resize != nil && j.Resize.Seq == r.Seq {
			j.Resize.Told = true
		}
		return nil
	})
	if err != nil {
		s.log.Warn("record that a resize was asked", "job", j.ID, "err", err)
	}
}

// checkResized ends the resize of a running job whose supervisor runs the gang at the
// new size (an attempt started after the request, with that many workers): a shrink's
// GPUs become the job's, and the message says so.
func (s *Service) checkResized(j *store.Job) {
	if j.Resize == nil {
		return
	}
	rec, err := rundir.ReadRecord(j.RunDir)
	if err != nil || len(rec.Attempts) == 0 {
		return
	}
	last := rec.Attempts[len(rec.Attempts)-1]
	if last.Workers != j.Resize.To || last.Started.Before(j.Resize.At) {
		return
	}
	_, err = s.cfg.Store.Update(j.ID, func(j *store.Job) error {
		if j.Resize == nil {
			return nil
		}
		r := j.Resize
		j.GPUs, j.Resize, j.Resizes = r.GPUs, nil, j.Resizes+1
		verb := "resized"
		if r.To > r.From {
			verb = "grew"
		}
		j.Message = fmt.Sprintf("%s from %d to %d workers: %s; resumed from its latest checkpoint (no restart used)", verb, r.From, r.To, r.Reason)
		if r.For != "" {
			j.Message = fmt.Sprintf("%s from %d to %d workers to make room for job %s; resumed from its latest checkpoint (no restart used)",
				verb, r.From, r.To, cmp.Or(r.ForName, r.For))
		}
		return nil
	})
	if err != nil {
		s.log.Warn("record a resize done", "job", j.ID, "err", err)
		return
	}
	s.poke()
}

// resizePath returns the path of the resize request file of the job with that ID.
func (s *Service) resizePath(id string) string {
	return filepath.Join(s.cfg.StateDir, "secrets", FolderName(id)+".resize")
}

// startWorkers returns the arguments that start a placed elastic job with the workers
// its placement has, when fewer than its most.
func startWorkers(j *store.Job, max int) []string {
	if n := len(j.GPUs); n > 0 && n < max {
		return []string{"--start-workers", strconv.Itoa(n)}
	}
	return nil
}
