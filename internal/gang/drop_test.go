package gang

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A worker of a 3-worker gang is lost and does not come back: Drop makes the gang go on
// with workers 0 and 2, renumbered as nodes 0 and 1 of 2, on the same members; the lost
// worker's pod is refused if it connects later, and the gang finishes with the two.
func TestDropLostWorker(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 3, MaxRestarts: 0, MaxDisruptions: 1, ReturnWait: wait})
	m0, m1, m2 := h.join(0, ""), h.join(1, ""), h.join(2, "")
	h.expect("attempt 1", h.started, call{0, 1}, call{1, 1}, call{2, 1})
	if got := h.lastStart(2); got != (Start{Attempt: 1, Node: 2, Nodes: 3}) {
		t.Errorf("worker 2's attempt 1: %+v; want node 2 of 3", got)
	}
	m1.cancel() // its node is lost
	h.expect("the others stop", h.stopped, call{1, 1}, call{0, 1}, call{2, 1})
	h.waitStatus("waiting for worker 1", func(s Status) bool { return s.Attempt == 2 && len(s.Missing) == 1 })
	ctx := context.Background()
	for _, bad := range []struct {
		workers []int
		want    string
	}{
		{[]int{0}, "worker 0 runs the coordinator"},
		{[]int{2}, "worker 2 (pod pod-2) is connected"},
		{[]int{3}, "worker 3 is not one of this gang's workers 0 to 2"},
	} {
		if err := h.c.Drop(ctx, bad.workers, "test"); !errors.Is(err, ErrNotDropped) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Drop(%v): %v; want a refusal saying %q", bad.workers, err, bad.want)
		}
	}
	if err := h.c.Drop(ctx, []int{1}, "node b lost"); err != nil {
		t.Fatal(err)
	}
	h.expect("attempt 2 without worker 1", h.started, call{0, 2}, call{2, 2})
	if got := [2]Start{h.lastStart(0), h.lastStart(2)}; got != [2]Start{{2, 0, 2}, {2, 1, 2}} {
		t.Errorf("attempt 2's starts: %+v; want workers 0 and 2 as nodes 0 and 1 of 2", got)
	}
	if err := h.c.Drop(ctx, []int{1}, "again"); err != nil {
		t.Errorf("dropping worker 1 again: %v; want nil (nothing changes)", err)
	}
	st := h.c.Status()
	want := Status{State: Running, Attempt: 2, Restarts: 1, Disruptions: 1, InPlace: 1, Dropped: []int{1},
		Resized:     "resized from 3 to 2 workers: worker 1 dropped (node b lost)",
		LastRestart: "attempt 2 restarted in place after worker 1 (pod pod-1) is leaving: its pod is stopping"}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status while attempt 2 runs (-want +got):\n%s", diff)
	}
	late := h.join(1, "").finished(t)
	var refused *RefusedError
	if !errors.As(late.err, &refused) || !strings.Contains(late.err.Error(), "worker 1 was dropped from the gang") {
		t.Errorf("worker 1's late pod: %v; want a refusal", late.err)
	}
	h.none("the late pod disturbs nothing", h.stopped, 0)
	h.end(0, succeeded)
	h.end(2, succeeded)
	if r := h.finished(); r.err != nil || r.res.Outcome != Succeeded || r.res.Reason != "all 2 workers succeeded in attempt 2" {
		t.Errorf("result: %+v, %v", r.res, r.err)
	}
	for i, m := range []*joined{m0, m2} {
		if f := m.finished(t); f.err != nil || f.fin.Outcome != Succeeded {
			t.Errorf("member %d: %+v, %v", i, f.fin, f.err)
		}
	}
}

// A worker that never connected for the first attempt can be dropped too: the gang starts
// with the rest.
func TestDropBeforeFirstAttempt(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 3, JoinWait: wait})
	h.join(0, "")
	h.join(1, "")
	h.waitStatus("waiting for worker 2", func(s Status) bool { return len(s.Missing) == 1 })
	if err := h.c.Drop(context.Background(), []int{2}, "its pod cannot be scheduled"); err != nil {
		t.Fatal(err)
	}
	h.expect("attempt 1 with 2 workers", h.started, call{0, 1}, call{1, 1})
	if got := h.lastStart(1); got != (Start{Attempt: 1, Node: 1, Nodes: 2}) {
		t.Errorf("worker 1's attempt 1: %+v; want node 1 of 2", got)
	}
}

// A coordinator that starts after workers were dropped (worker 0's pod was replaced) does
// not wait for them, and refuses them.
func TestDroppedBefore(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 3, Dropped: []int{1}, JoinWait: wait})
	h.join(0, "")
	h.join(2, "")
	h.expect("attempt 1 without worker 1", h.started, call{0, 1}, call{2, 1})
	if got := h.lastStart(2); got != (Start{Attempt: 1, Node: 1, Nodes: 2}) {
		t.Errorf("worker 2's attempt 1: %+v; want node 1 of 2", got)
	}
	var refused *RefusedError
	if f := h.join(1, "").finished(t); !errors.As(f.err, &refused) {
		t.Errorf("worker 1: %v; want a refusal", f.err)
	}
}
