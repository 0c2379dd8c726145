package launcher

import (
	"cmp"
	"time"
)

// Resize asks a running elastic gang to run with other workers: the job server grows a
// gang into GPUs (or CPU) that became free, or shrinks it toward spec.minWorkers to make
// room for a job of higher priority. The launcher stops the gang at a checkpoint and
// starts the next attempt with Slots, using no restart: a grow waits for the next
// checkpoint committed after the request; a shrink (Now) gives the ranks the preemption
// notice, so that they save at once, within the grace period. Ranks that do not report
// through the helper have no checkpoint the launcher knows of: they are stopped at once.
type Resize struct {
	// Slots are the workers after the resize, worker 0 first, each with its GPUs.
	Slots []Slot
	// Reason says why, for the notices: "GPUs 2,3 free".
	Reason string
	// Now asks the ranks to save a checkpoint now (the preemption notice) instead of
	// waiting for their next one.
	Now bool
}

// resizeVerb says how a gang changed: "grew" or "resized" (shrank).
func resizeVerb(from, to int) string {
	if to > from {
		return "grew"
	}
	return "resized"
}

// applyResize takes the pending resize: the placement and spec.workers become its, the
// elastic bookkeeping of failures starts over, and the notice of the attempt that
// stopped is cleared for the next. It returns the size before and why.
func (l *Launcher) applyResize() (from int, why string) {
	r := l.resize
	l.resize = nil
	from = l.Job.Spec.WorkerCount()
	e := &l.elastic
	e.max = cmp.Or(e.max, l.MaxWorkers, from)
	e.origins, e.streakOf, e.streak = nil, -1, 0
	l.Placement.Slots = r.Slots
	n := int32(len(r.Slots))
	l.Job.Spec.Workers = &n
	if l.Notice != nil {
		if err := l.Notice.Clear(); err != nil {
			l.Logger.Warn("could not clear the preemption notice after a resize", "err", err)
		}
	}
	return from, r.Reason
}

// resizing is what an attempt does about a resize asked while it runs.
type resizing struct {
	commit <-chan string // the next checkpoint committed after a grow's request
}

// ask notes the resize r for the next attempt and says how the attempt stops for it:
// now (stopNow), at the preemption notice's checkpoint (notice, when r.Now), or at the
// next committed checkpoint (wait).
func (a *attempt) askResize(r Resize, rz *resizing) (stopNow bool, notice bool) {
	a.l.resize = &r
	n := a.l.Notice
	switch {
	case n == nil || !n.Listening():
		return true, false
	case r.Now:
		return false, true
	}
	rz.commit = n.CommittedAfter(time.Now())
	a.l.notice("asked to grow to %d workers (%s): the gang resizes at its next committed checkpoint", len(r.Slots), r.Reason)
	return false, false
}
