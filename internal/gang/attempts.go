package gang

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// done ends Run: the gang finished (res), or the coordinator stopped (err).
type done struct {
	res Result
	err error
}

// end is how an attempt ended, as the coordinator saw it.
type end struct {
	succeeded bool
	// disruption: a member was lost or replaced; not the job's code failing.
	disruption bool
	// grow: readmitted workers are connected (Readmit), and the gang grows from from
	// workers; not a failure.
	grow bool
	from int
	// reason: "rank 1 (worker 1, pid 4242) exited with code 1", "worker 1 (pod x) was lost: EOF".
	reason string
	at     time.Time
}

// run is the coordinator's loop: wait for every worker, then start, supervise, stop and
// restart attempts until the gang finishes.
func (s *session) run(ctx context.Context) (Result, error) {
	s.publish(Waiting)
	if d := s.gather(ctx, s.c.JoinWait, ""); d != nil {
		return d.res, d.err
	}
	var failed time.Time // when the previous attempt failed
	for {
		a := s.st.Attempt
		if d := s.begin(ctx, failed); d != nil {
			return d.res, d.err
		}
		e, d := s.supervise(ctx)
		if d != nil {
			return d.res, d.err
		}
		if e.succeeded {
			d := s.finish(ctx, Succeeded, fmt.Sprintf("all %d workers succeeded in attempt %d", len(s.active()), a), "")
			return d.res, d.err
		}
		failed = e.at
		s.st.Why, s.st.Growing = fmt.Sprintf("attempt %d failed: %s", a, e.reason), e.grow
		if e.grow {
			s.st.Why = fmt.Sprintf("attempt %d ends: %s", a, e.reason)
		}
		s.notice("%s; stopping every worker's processes (up to %s)", s.st.Why, s.c.StopWait)
		lost, d := s.stopAll(ctx, e.reason)
		if d != nil {
			return d.res, d.err
		}
		s.takeJoining() // readmitted workers join whatever attempt comes next
		if len(lost) > 0 && !e.disruption {
			// A worker lost as the gang stops is why its peers' ranks failed, most likely.
			e.grow, e.disruption, e.reason = false, true, fmt.Sprintf("%s (as %s)", e.reason, lost[0].reason)
		}
		if e.grow {
			s.grew(e)
		} else if d := s.restart(ctx, e); d != nil {
			return d.res, d.err
		}
		if d := s.gather(ctx, s.c.ReturnWait, e.reason); d != nil {
			return d.res, d.err
		}
	}
}

// gather waits until every worker index has a member, for at most wait, saying who is
// missing; after, when set, is why a member went missing (a restart's wait).
func (s *session) gather(ctx context.Context, wait time.Duration, after string) *done {
	if len(s.missing()) == 0 {
		return nil
	}
	state := s.st.State
	s.publish(state)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTimer(firstNotice)
	defer tick.Stop()
	began, noticed := time.Now(), false
	for {
		missing := s.missing()
		if len(missing) == 0 {
			if noticed {
				s.notice("attempt %d: all %d workers are connected after %s", s.st.Attempt, len(s.active()), time.Since(began).Round(time.Millisecond))
			}
			s.publish(state)
			return nil
		}
		select {
		case <-ctx.Done():
			return &done{err: ctx.Err()}
		case e := <-s.events:
			s.between(e)
			s.publish(state)
		case <-tick.C:
			noticed = true
			s.notice("attempt %d: waiting for %s to connect to worker 0 (%s of up to %s)", s.st.Attempt, workers(missing),
				time.Since(began).Round(time.Second), wait)
			tick.Reset(noticeEvery)
		case <-deadline.C:
			if after == "" {
				return s.finish(ctx, Failed, fmt.Sprintf("attempt %d could not start: %s did not connect to worker 0 within %s",
					s.st.Attempt, workers(missing), wait), "")
			}
			return s.finish(ctx, Failed, fmt.Sprintf("attempt %d could not start: %s did not come back within %s (after %s)",
				s.st.Attempt, workers(missing), wait, after), "")
		}
	}
}

// between handles an event while no attempt runs.
func (s *session) between(e event) {
	switch {
	case s.request(e):
	case e.joined && s.dropped[e.m.worker]:
		s.refuseDropped(e.m)
	case e.joined:
		if s.join(e.m) == nil && s.st.State == Restarting {
			s.notice("%s connected", e.m)
		}
	case !s.current(e):
	case e.err != nil:
		s.drop(e.m, e.err)
	case e.msg.Type == typeEnded || e.msg.Type == typeStopped:
		// late news of an attempt that is over
	case e.msg.Type == typeLeaving:
		s.drop(e.m, leavingError(e.msg))
	default:
		s.drop(e.m, protocolError("%s between attempts", e.msg.Type))
	}
}

// begin prepares the current attempt and tells every member to start it.
func (s *session) begin(ctx context.Context, failed time.Time) *done {
	a := s.st.Attempt
	if s.c.Prepare != nil {
		if err := s.c.Prepare(ctx, a); err != nil {
			if ctx.Err() != nil {
				return &done{err: ctx.Err()}
			}
			return s.finish(ctx, Failed, fmt.Sprintf("attempt %d could not be prepared: %v", a, err), "")
		}
	}
	for _, m := range s.members {
		m.ended, m.stopped = false, false
	}
	s.st.Why, s.st.Growing = "", false
	s.publish(Running)
	for node, w := range s.active() {
		if m := s.members[w]; m != nil {
			if err := m.send(message{Type: typeStart, Attempt: a, Node: node, Nodes: len(s.active())}); err != nil {
				s.drop(m, err)
			}
		}
	}
	if !failed.IsZero() {
		s.log.Info("gang: attempt started in place", "attempt", a, "sinceFailure", time.Since(failed))
	}
	return nil
}

// supervise follows the current attempt until a member fails, is lost or replaced, or
// every member succeeded.
func (s *session) supervise(ctx context.Context) (end, *done) {
	a := s.st.Attempt
	if missing := s.missing(); len(missing) > 0 {
		return end{disruption: true, at: time.Now(), reason: fmt.Sprintf("%s was lost as attempt %d started", workers(missing), a)}, nil
	}
	var grow <-chan struct{} // set once every readmitted worker is connected
	for {
		var e event
		grow = s.growSignal(grow)
		select {
		case <-ctx.Done():
			return end{}, &done{err: ctx.Err()}
		case <-grow:
			if s.joinersReady() {
				return s.growEnd(), nil
			}
			grow = nil // one left again: wait for it, then for GrowWhen again
			continue
		case e = <-s.events:
		}
		switch {
		case s.request(e):
		case e.joined && s.dropped[e.m.worker]:
			s.refuseDropped(e.m)
		case e.joined && s.joining[e.m.worker]:
			s.join(e.m)
			e.m.ended = true // it runs nothing of this attempt
			s.publish(Running)
		case s.current(e) && s.joining[e.m.worker]:
			s.joiner(e)
		case e.joined:
			// A member says hello only with nothing running: another pod of a worker index
			// that has a member (its replacement), which ends the attempt.
			old := s.join(e.m)
			e.m.ended = true
			what := fmt.Sprintf("%s connected during attempt %d", e.m, a)
			if old != nil {
				what = fmt.Sprintf("%s was replaced by pod %s", old, e.m.pod)
			}
			return end{disruption: true, at: time.Now(), reason: what}, nil
		case !s.current(e):
		case e.err != nil:
			s.drop(e.m, e.err)
			return end{disruption: true, at: time.Now(), reason: fmt.Sprintf("%s was lost: %v", e.m, e.err)}, nil
		case e.msg.Type == typeLeaving:
			s.drop(e.m, leavingError(e.msg))
			return end{disruption: true, at: time.Now(), reason: fmt.Sprintf("%s is leaving: %s", e.m, e.msg.Reason)}, nil
		case e.msg.Type == typeEnded && e.msg.Attempt == a && !e.m.ended:
			e.m.ended = true
			if e.msg.Outcome != Succeeded {
				return end{at: time.Now(), reason: failureText(e.m, e.msg)}, nil
			}
			if s.allEnded() {
				return end{succeeded: true}, nil
			}
		case e.msg.Type == typeEnded || e.msg.Type == typeStopped:
			// news of an earlier attempt
		default:
			err := protocolError("%s during attempt %d", e.msg.Type, a)
			s.drop(e.m, err)
			return end{disruption: true, at: time.Now(), reason: fmt.Sprintf("%s was lost: %v", e.m, err)}, nil
		}
	}
}

func (s *session) allEnded() bool {
	for _, w := range s.active() {
		if m := s.members[w]; m == nil || !m.ended {
			return false
		}
	}
	return true
}

// failureText says how a member's part of an attempt failed.
func failureText(m *member, msg message) string {
	reason := msg.Reason
	if reason == "" {
		reason = string(msg.Outcome)
	}
	switch {
	case msg.Outcome == Hung:
		return fmt.Sprintf("worker %d looked hung (%s)", m.worker, reason)
	case msg.Rank >= 0:
		return reason // the launcher's "rank 1 (worker 1, pid 4242) exited with code 1"
	}
	return fmt.Sprintf("worker %d failed: %s", m.worker, reason)
}

// loss is a member that went while the gang stopped, and why.
type loss struct {
	m      *member
	reason string
}

// stopAll tells every member to stop the current attempt and waits until each confirms,
// for at most StopWait; one that does not is dropped. It returns the members whose
// connection ended (or who left) meanwhile.
func (s *session) stopAll(ctx context.Context, why string) ([]loss, *done) {
	var lost []loss
	a := s.st.Attempt
	s.publish(Restarting)
	if s.c.Stopping != nil {
		s.c.Stopping(a)
	}
	s.sendAll(message{Type: typeStop, Attempt: a, Reason: why})
	deadline := time.NewTimer(s.c.StopWait)
	defer deadline.Stop()
	for {
		var pending []*member
		for w := range s.c.Workers {
			if m := s.members[w]; m != nil && !m.stopped {
				pending = append(pending, m)
			}
		}
		if len(pending) == 0 {
			return lost, nil
		}
		select {
		case <-ctx.Done():
			return lost, &done{err: ctx.Err()}
		case e := <-s.events:
			switch {
			case s.request(e):
			case e.joined && s.dropped[e.m.worker]:
				s.refuseDropped(e.m)
			case e.joined:
				s.join(e.m)
				e.m.stopped = true // nothing runs in a member that says hello
			case !s.current(e):
			case e.err != nil:
				s.drop(e.m, e.err)
				lost = append(lost, loss{e.m, fmt.Sprintf("%s was lost: %v", e.m, e.err)})
			case e.msg.Type == typeLeaving:
				s.drop(e.m, leavingError(e.msg))
				lost = append(lost, loss{e.m, fmt.Sprintf("%s is leaving: %s", e.m, e.msg.Reason)})
			case e.msg.Type == typeStopped && e.msg.Attempt == a:
				e.m.stopped = true
			case e.msg.Type == typeEnded || e.msg.Type == typeStopped:
			default:
				s.drop(e.m, protocolError("%s while attempt %d stops", e.msg.Type, a))
			}
		case <-deadline.C:
			for _, m := range pending {
				s.notice("%s did not confirm within %s that attempt %d stopped: dropping it (it stops its processes itself, and the next attempt waits for it to connect again)",
					m, s.c.StopWait, a)
				s.drop(m, errors.New("no stopped in time"))
			}
		}
	}
}

func leavingError(msg message) error { return fmt.Errorf("leaving: %s", msg.Reason) }

// restart moves on to the next attempt after e, or finishes the gang failed when no
// restart is left.
func (s *session) restart(ctx context.Context, e end) *done {
	a, c := s.st.Attempt, s.c
	count := ""
	switch {
	case e.disruption && s.st.Disruptions >= c.MaxDisruptions:
		return s.finish(ctx, Failed, fmt.Sprintf("attempt %d: %s; not restarting: %d disruptions already (maxDisruptions %d)",
			a, e.reason, s.st.Disruptions, c.MaxDisruptions), FinalDisruptions)
	case e.disruption:
		s.st.Disruptions++
		count = "a disruption does not count against maxRestarts"
	case s.st.Restarts-s.st.Disruptions >= c.MaxRestarts:
		return s.finish(ctx, Failed, fmt.Sprintf("%s in attempt %d; no restarts left (maxRestarts %d)", e.reason, a, c.MaxRestarts), FinalRestarts)
	default:
		count = fmt.Sprintf("restart %d of %d", s.st.Restarts-s.st.Disruptions+1, c.MaxRestarts)
	}
	s.st.Restarts++
	s.st.InPlace++
	s.st.Attempt++
	s.st.LastRestart = fmt.Sprintf("attempt %d restarted in place after %s", s.st.Attempt, e.reason)
	s.notice("attempt %d stopped; restarting the gang in place as attempt %d (%s)", a, s.st.Attempt, count)
	s.publish(Restarting)
	return nil
}

// finish tells every member how the gang ended and waits, briefly, for them to hang up.
func (s *session) finish(ctx context.Context, outcome Outcome, reason, final string) *done {
	s.publish(Finished)
	msg := message{Type: typeFinish, Outcome: outcome, Reason: reason, Final: final,
		Attempt: s.st.Attempt, Restarts: s.st.Restarts, Disruptions: s.st.Disruptions}
	s.sendAll(msg)
	s.log.Info("gang: finished", "outcome", outcome, "reason", reason, "final", final)
	wait := time.NewTimer(byeWait)
	defer wait.Stop()
	for len(s.members) > 0 {
		select {
		case <-ctx.Done():
			return &done{err: ctx.Err()}
		case <-wait.C:
			return &done{res: Result{Outcome: outcome, Reason: reason, Final: final, Status: s.st}}
		case e := <-s.events:
			switch {
			case s.request(e):
			case e.joined && s.dropped[e.m.worker]:
				s.refuseDropped(e.m)
			case e.joined:
				s.join(e.m)
				if err := e.m.send(msg); err != nil {
					s.drop(e.m, err)
				}
			case !s.current(e):
			case e.err != nil:
				s.drop(e.m, e.err)
			}
		}
	}
	return &done{res: Result{Outcome: outcome, Reason: reason, Final: final, Status: s.st}}
}
