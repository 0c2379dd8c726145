package gang

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// An elastic gang that went on without some workers (Drop) grows back in place: whoever
// makes the pods (the operator) calls Readmit once there is room again, then makes the
// readmitted workers' pods. While an attempt runs, the readmitted workers join it idle:
// their members connect and wait, and the attempt goes on with the others. Once every
// readmitted worker is connected, the coordinator waits for Coordinator.GrowWhen (worker
// 0: the next committed checkpoint, or the resize interval) and then stops the attempt and
// starts the next one with them, counting no restart. The workers already running keep
// their pods (and their spares); only the readmitted workers' pods are new. Between
// attempts a readmitted worker is simply waited for again.

// ErrNotReadmitted marks a Readmit that the coordinator refused: the gang did not change.
var ErrNotReadmitted = errors.New("the gang's coordinator did not readmit the workers")

// Readmit makes the gang take back workers it dropped (Drop), at its next attempt: while
// an attempt runs, the one that starts once they all connected and GrowWhen says so.
// Readmitting workers already readmitted, or never dropped, changes nothing and returns
// nil, so a caller may repeat the call until it knows it took. The error wraps
// ErrNotReadmitted when the coordinator refused.
func (c *Coordinator) Readmit(ctx context.Context, workers []int, reason string) error {
	return c.ask(ctx, &membership{readmit: true, workers: slices.Clone(workers), reason: reason}, ErrNotReadmitted)
}

// readmitWorkers takes back the dropped worker indices ids, or says why it cannot. While
// an attempt runs they join it idle (s.joining); otherwise the next attempt waits for them.
func (s *session) readmitWorkers(ids []int, reason string) error {
	if s.st.State == Finished {
		return fmt.Errorf("%w: the gang finished", ErrNotReadmitted)
	}
	var add []int
	for _, w := range ids {
		switch {
		case w == 0:
			return fmt.Errorf("%w: worker 0 runs the coordinator and is never dropped", ErrNotReadmitted)
		case w < 0 || w >= s.c.Workers:
			return fmt.Errorf("%w: worker %d is not one of this gang's workers 0 to %d", ErrNotReadmitted, w, s.c.Workers-1)
		case s.dropped[w] && !slices.Contains(add, w):
			add = append(add, w)
		}
	}
	if len(add) == 0 {
		return nil
	}
	slices.Sort(add)
	from := len(s.active())
	for _, w := range add {
		delete(s.dropped, w)
		if s.st.State == Running {
			s.joining[w] = true
		}
	}
	to := from + len(add)
	if s.st.State == Running {
		s.readmitted = time.Now()
		s.notice("attempt %d: %s readmitted (%s): once connected, the gang grows from %d to %d workers at its next checkpoint",
			s.st.Attempt, workers(add), reason, from, to)
	} else {
		s.notice("attempt %d: %s readmitted (%s): the attempt starts with %d workers once connected", s.st.Attempt, workers(add), reason, to)
	}
	s.growWhy = fmt.Sprintf("%s readmitted (%s)", workers(add), reason)
	s.publish(s.st.State)
	return nil
}

// joiner handles an event of a readmitted worker's member while the attempt it waits to
// grow into runs: it runs nothing, so its loss or its leaving only makes the gang wait for
// it again, and news of attempts means nothing.
func (s *session) joiner(e event) {
	switch {
	case e.err != nil:
		s.drop(e.m, e.err)
	case e.msg.Type == typeLeaving:
		s.drop(e.m, leavingError(e.msg))
	case e.msg.Type == typeEnded || e.msg.Type == typeStopped:
	default:
		s.drop(e.m, protocolError("%s while waiting to join attempt %d", e.msg.Type, s.st.Attempt))
	}
	s.publish(s.st.State)
}

// joinersReady reports whether workers wait to join and all are connected.
func (s *session) joinersReady() bool {
	if len(s.joining) == 0 {
		return false
	}
	for w := range s.joining {
		if s.members[w] == nil {
			return false
		}
	}
	return true
}

// growSignal returns the channel that says when the gang grows, once every readmitted
// worker is connected (nil before: nothing to wait for yet).
func (s *session) growSignal(pending <-chan struct{}) <-chan struct{} {
	if !s.joinersReady() {
		return nil
	}
	if pending != nil {
		return pending
	}
	if s.c.GrowWhen == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return s.c.GrowWhen(s.st.Attempt, s.readmitted)
}

// growEnd is how the attempt ends for a grow.
func (s *session) growEnd() end {
	from := len(s.active())
	return end{grow: true, from: from, at: time.Now(),
		reason: fmt.Sprintf("growing from %d to %d workers: %s", from, from+len(s.joining), s.growWhy)}
}

// takeJoining makes the workers that waited to join active, for the next attempt.
func (s *session) takeJoining() {
	clear(s.joining)
}

// grew moves on to the next attempt after the attempt stopped for a grow, using no
// restart.
func (s *session) grew(e end) {
	a := s.st.Attempt
	s.st.Attempt++
	s.st.Resized = fmt.Sprintf("resized from %d to %d workers: %s", e.from, len(s.active()), s.growWhy)
	s.st.LastRestart = fmt.Sprintf("attempt %d grew in place: %s", s.st.Attempt, s.st.Resized)
	s.notice("attempt %d stopped; the gang grows in place as attempt %d with %d workers (a resize uses no restart)",
		a, s.st.Attempt, len(s.active()))
	s.publish(Restarting)
}

// joiningList is the readmitted workers that wait to join, in order.
func (s *session) joiningList() []int { return slices.Sorted(maps.Keys(s.joining)) }
