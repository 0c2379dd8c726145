package gang

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// An elastic gang goes on without workers that cannot come back (their node is lost, their
// replacement pod cannot be scheduled): whoever made the pods (the operator) calls Drop,
// and the coordinator, which was waiting for those workers to connect, starts the next
// attempt with the others, on the same pods. The workers left are renumbered in order
// (Start.Node, Start.Nodes), so their ranks stay 0..N-1; worker 0 stays node 0. A worker
// dropped is refused if its pod connects later. A gang grows back on new pods.

// ErrNotDropped marks a Drop that the coordinator refused: the gang did not change.
var ErrNotDropped = errors.New("the gang's coordinator did not drop the workers")

// membership is a Drop or a Readmit call on its way to the coordinator's loop.
type membership struct {
	readmit bool // else a drop
	workers []int
	reason  string
	reply   chan error
}

// Drop makes the gang go on without the given workers, which must not be connected (they
// were lost, and are missing): the coordinator stops waiting for them and starts its next
// attempt with the rest, counting no restart. Worker 0 cannot be dropped. Dropping workers
// already dropped changes nothing and returns nil, so a caller may repeat the call until it
// knows it took. The error wraps ErrNotDropped when the coordinator refused.
func (c *Coordinator) Drop(ctx context.Context, workers []int, reason string) error {
	return c.ask(ctx, &membership{workers: slices.Clone(workers), reason: reason}, ErrNotDropped)
}

// ask hands req to the Run under way and waits for its answer; refused is what the error
// wraps when no Run takes it.
func (c *Coordinator) ask(ctx context.Context, req *membership, refused error) error {
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		return fmt.Errorf("%w: it is not running yet", refused)
	}
	req.reply = make(chan error, 1)
	select {
	case s.events <- event{req: req}:
	case <-s.quit:
		return fmt.Errorf("%w: the gang is over", refused)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wasDropped reports whether worker w was dropped, as last published (for handshakes,
// which run beside the loop; join checks again in it).
func (c *Coordinator) wasDropped(w int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.status.Dropped, w)
}

// dropWorkers drops the worker indices ids, or says why it cannot.
func (s *session) dropWorkers(ids []int, reason string) error {
	if s.st.State == Finished {
		return fmt.Errorf("%w: the gang finished", ErrNotDropped)
	}
	var add []int
	for _, w := range ids {
		switch {
		case w == 0:
			return fmt.Errorf("%w: worker 0 runs the coordinator and cannot be dropped", ErrNotDropped)
		case w < 0 || w >= s.c.Workers:
			return fmt.Errorf("%w: worker %d is not one of this gang's workers 0 to %d", ErrNotDropped, w, s.c.Workers-1)
		case s.members[w] != nil:
			return fmt.Errorf("%w: %s is connected", ErrNotDropped, s.members[w])
		case !s.dropped[w] && !slices.Contains(add, w):
			add = append(add, w)
		}
	}
	add = s.unjoin(add, reason)
	if len(add) == 0 {
		return nil
	}
	from := len(s.active())
	for _, w := range add {
		s.dropped[w] = true
	}
	slices.Sort(add)
	to := len(s.active())
	s.st.Resized = fmt.Sprintf("resized from %d to %d workers: %s dropped (%s)", from, to, workers(add), reason)
	s.notice("attempt %d: the gang goes on without %s (%s): %d of its %d workers run from now on, renumbered in order",
		s.st.Attempt, workers(add), reason, to, s.c.Workers)
	s.publish(s.st.State)
	return nil
}

// refuseDropped refuses a member of a dropped worker index that got through its
// handshake as the worker was dropped.
func (s *session) refuseDropped(m *member) {
	s.refuse(m.link, droppedText(m.worker))
}

// droppedText is why a dropped worker's member is refused.
func droppedText(w int) string {
	return fmt.Sprintf("worker %d was dropped from the gang, which goes on without it", w)
}

// unjoin drops the workers among ids that were readmitted and wait to join (their pods
// cannot be scheduled after all): the gang, which never ran with them, does not change
// size. It returns the others.
func (s *session) unjoin(ids []int, reason string) []int {
	var rest, out []int
	for _, w := range ids {
		if s.joining[w] {
			delete(s.joining, w)
			s.dropped[w] = true
			out = append(out, w)
			continue
		}
		rest = append(rest, w)
	}
	if len(out) > 0 {
		slices.Sort(out)
		s.notice("attempt %d: %s dropped again before joining (%s): the gang stays at %d workers", s.st.Attempt, workers(out), reason, len(s.active()))
		s.publish(s.st.State)
	}
	return rest
}
