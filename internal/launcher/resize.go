package launcher

import (
	"cmp"
	"fmt"
	"time"

	"github.com/trainyard/trainyard/internal/units"
)

// Resize asks a running elastic gang to run with other workers: the job server grows a
// gang into GPUs (or CPU) that became free, or shrinks it toward spec.minWorkers to make
// room for a job of higher priority. The launcher stops the gang at a checkpoint and
// starts the next attempt with Slots, using no restart: a grow waits for the next
// checkpoint committed after the request, up to the job's resize interval
// (spec.resizeIntervalSeconds), then gives the ranks the preemption notice; a shrink (Now)
// gives them the notice at once, so that they save within the grace period. Ranks that
// do not report through the helper have no checkpoint the launcher knows of: they are
// stopped at once.
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
	commit <-chan string    // the next checkpoint committed after a grow's request
	timer  <-chan time.Time // the grow's resize interval, from its first request: then it waits no more
	wait   time.Duration    // that interval, for the notices
}

// stop forgets the pending grow: the gang is stopping anyway.
func (rz *resizing) stop() { rz.commit, rz.timer = nil, nil }

// ask notes the resize r for the next attempt and says how the attempt stops for it:
// now (stopNow), with the preemption notice (notice: a shrink, or a grow whose resize
// interval is 0), or at the next committed checkpoint or the end of the resize interval,
// whichever comes first (neither: rz says when).
func (a *attempt) askResize(r Resize, rz *resizing) (stopNow bool, notice bool) {
	a.l.resize = &r
	n := a.l.Notice
	switch {
	case n == nil || !n.Listening():
		return true, false
	case r.Now:
		return false, true
	}
	wait := a.l.Job.Spec.ResizeInterval()
	if wait <= 0 {
		a.l.notice("asked to grow to %d workers (%s): the resize interval is 0, so the gang resizes now", len(r.Slots), r.Reason)
		return false, true
	}
	rz.commit = n.CommittedAfter(time.Now())
	if rz.timer == nil { // a later request keeps the first one's interval
		rz.timer, rz.wait = time.After(wait), wait
	}
	a.l.notice("asked to grow to %d workers (%s): the gang resizes at its next committed checkpoint, or in %s without one (resize interval)",
		len(r.Slots), r.Reason, units.Duration(rz.wait))
	return false, false
}

// growAnyway is the end of a pending grow's resize interval without a committed
// checkpoint: the ranks get the preemption notice to save one now, unless they cannot
// (then stopNow, and why is the attempt's reason). It does nothing while a notice is
// out already.
func (a *attempt) growAnyway(rz *resizing, pre *preemption, grace time.Duration) (stopNow bool, why string) {
	rz.stop()
	r := a.l.resize
	if r == nil || pre.on() {
		return false, ""
	}
	why = fmt.Sprintf("resizing to %s: %s; no checkpoint committed within %s", units.Count(len(r.Slots), "worker"), r.Reason, units.Duration(rz.wait))
	if pre.begin(a.l, why, grace, false) {
		return false, ""
	}
	a.l.notice("asked to grow to %d workers (%s): no checkpoint committed within %s; resizing now, %s",
		len(r.Slots), r.Reason, units.Duration(rz.wait), a.l.resumesFrom())
	return true, why
}

// resumesFrom says, for a notice, where a gang stopped without a new checkpoint goes on
// from: "from checkpoint_000004 (the steps since are redone)".
func (l *Launcher) resumesFrom() string {
	if l.Notice != nil {
		if name := l.Notice.Latest(); name != "" {
			return "from " + name + " (the steps since are redone)"
		}
	}
	return "from the start (no checkpoint committed yet)"
}

// resumeNote ends the notice of a resize's preemption notice whose deadline passed
// without a checkpoint: "; it resumes from checkpoint_000004 (the steps since are
// redone)"; "" when the gang is not stopping to resize.
func (a *attempt) resumeNote() string {
	if a.l.resize == nil || a.l.preempted != "" {
		return ""
	}
	return "; it resumes " + a.l.resumesFrom()
}
