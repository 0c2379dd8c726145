package gang

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shrunk runs a 3-worker gang whose worker 2 is lost and dropped: attempt 2 runs on
// workers 0 and 1. grow is what GrowWhen returns; its calls go to asked.
func shrunk(t *testing.T, grow chan struct{}, asked chan int) *harness {
	t.Helper()
	c := &Coordinator{Workers: 3, MaxRestarts: 1, MaxDisruptions: 1, ReturnWait: wait}
	if grow != nil {
		c.GrowWhen = func(attempt int, readmitted time.Time) <-chan struct{} {
			if readmitted.IsZero() {
				t.Error("GrowWhen got no readmit time")
			}
			asked <- attempt
			return grow
		}
	}
	h := newHarness(t, c)
	h.join(0, "")
	h.join(1, "")
	lost := h.join(2, "")
	h.expect("attempt 1", h.started, call{0, 1}, call{1, 1}, call{2, 1})
	lost.cancel()
	h.expect("the others stop", h.stopped, call{2, 1}, call{0, 1}, call{1, 1})
	h.waitStatus("waiting for worker 2", func(s Status) bool { return s.Attempt == 2 && len(s.Missing) == 1 })
	if err := h.c.Drop(context.Background(), []int{2}, "node c lost"); err != nil {
		t.Fatal(err)
	}
	h.expect("attempt 2 without worker 2", h.started, call{0, 2}, call{1, 2})
	return h
}

// A dropped worker readmitted while the smaller gang runs joins it idle: the attempt goes
// on until GrowWhen says so, then stops and the next starts with all three workers,
// numbered as before the drop, using no restart.
func TestReadmitGrowsInPlace(t *testing.T) {
	grow, asked := make(chan struct{}), make(chan int, 4)
	h := shrunk(t, grow, asked)
	ctx := context.Background()
	for _, bad := range []struct {
		workers []int
		want    string
	}{
		{[]int{0}, "worker 0 runs the coordinator"},
		{[]int{3}, "worker 3 is not one of this gang's workers 0 to 2"},
	} {
		if err := h.c.Readmit(ctx, bad.workers, "test"); !errors.Is(err, ErrNotReadmitted) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Readmit(%v): %v; want a refusal saying %q", bad.workers, err, bad.want)
		}
	}
	if err := h.c.Readmit(ctx, []int{2}, "node c is ready again"); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Readmit(ctx, []int{1, 2}, "again"); err != nil {
		t.Errorf("readmitting again: %v; want nil (nothing changes)", err)
	}
	st := h.c.Status()
	if st.State != Running || !cmp.Equal(st.Joining, []int{2}) || len(st.Dropped) != 0 || !cmp.Equal(st.Missing, []int{2}) {
		t.Errorf("status after the readmit: %+v; want attempt 2 running, worker 2 joining", st)
	}
	h.join(2, "")
	select {
	case a := <-asked:
		if a != 2 {
			t.Errorf("GrowWhen asked in attempt %d; want 2", a)
		}
	case <-time.After(wait):
		t.Fatal("GrowWhen was not asked once worker 2 connected")
	}
	h.none("the attempt goes on until GrowWhen says", h.stopped, 200*time.Millisecond)
	close(grow)
	h.expect("attempt 2 stops", h.stopped, call{0, 2}, call{1, 2})
	h.expect("attempt 3 with all three", h.started, call{0, 3}, call{1, 3}, call{2, 3})
	if got := h.lastStart(2); got != (Start{Attempt: 3, Node: 2, Nodes: 3}) {
		t.Errorf("worker 2's attempt 3: %+v; want node 2 of 3", got)
	}
	st = h.waitStatus("attempt 3 runs", func(s Status) bool { return s.State == Running && s.Attempt == 3 })
	if st.Restarts != 1 || st.Disruptions != 1 || st.InPlace != 1 || len(st.Joining) != 0 || len(st.Dropped) != 0 ||
		st.Resized != "resized from 2 to 3 workers: worker 2 readmitted (node c is ready again)" {
		t.Errorf("status after the grow: %+v; want the loss's restart only, and the resize", st)
	}
	for _, w := range []int{0, 1, 2} {
		h.end(w, succeeded)
	}
	if r := h.finished(); r.err != nil || r.res.Reason != "all 3 workers succeeded in attempt 3" {
		t.Errorf("result: %+v, %v", r.res, r.err)
	}
}

// A readmitted worker lost before the gang grows ends nothing: the attempt goes on, the
// gang waits for it again, and once it is dropped again the gang finishes at its size.
func TestReadmittedWorkerLostBeforeTheGrow(t *testing.T) {
	grow, asked := make(chan struct{}), make(chan int, 4)
	h := shrunk(t, grow, asked)
	if err := h.c.Readmit(context.Background(), []int{2}, "room found"); err != nil {
		t.Fatal(err)
	}
	j := h.join(2, "")
	<-asked
	j.cancel()
	h.waitStatus("worker 2 gone again", func(s Status) bool { return cmp.Equal(s.Joining, []int{2}) && cmp.Equal(s.Missing, []int{2}) })
	close(grow) // too late: worker 2 is not connected
	h.none("the attempt goes on", h.stopped, 200*time.Millisecond)
	if err := h.c.Drop(context.Background(), []int{2}, "its pod cannot be scheduled"); err != nil {
		t.Fatal(err)
	}
	st := h.waitStatus("worker 2 dropped again", func(s Status) bool { return len(s.Joining) == 0 && len(s.Dropped) == 1 })
	if st.Attempt != 2 || st.State != Running {
		t.Errorf("status: %+v; want attempt 2 still running", st)
	}
	h.end(0, succeeded)
	h.end(1, succeeded)
	if r := h.finished(); r.err != nil || r.res.Reason != "all 2 workers succeeded in attempt 2" {
		t.Errorf("result: %+v, %v", r.res, r.err)
	}
}

// An attempt that fails while a readmitted worker waits to join restarts with it.
func TestReadmittedWorkerJoinsARestart(t *testing.T) {
	grow, asked := make(chan struct{}), make(chan int, 4)
	h := shrunk(t, grow, asked)
	if err := h.c.Readmit(context.Background(), []int{2}, "room found"); err != nil {
		t.Fatal(err)
	}
	h.join(2, "")
	<-asked
	h.end(1, rank1Dies)
	h.expect("attempt 2 stops", h.stopped, call{0, 2})
	h.expect("attempt 3 with all three", h.started, call{0, 3}, call{1, 3}, call{2, 3})
	st := h.c.Status()
	if st.Restarts != 2 || st.Disruptions != 1 {
		t.Errorf("status: %+v; want the failure counted as a restart", st)
	}
}

// Workers readmitted while no attempt runs are waited for by the next.
func TestReadmitBetweenAttempts(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 3, Dropped: []int{2}, JoinWait: wait})
	h.join(0, "")
	h.waitStatus("waiting for worker 1", func(s Status) bool { return cmp.Equal(s.Missing, []int{1}) })
	if err := h.c.Readmit(context.Background(), []int{2}, "room found"); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("waiting for workers 1 and 2", func(s Status) bool { return cmp.Equal(s.Missing, []int{1, 2}) && len(s.Dropped) == 0 })
	h.join(1, "")
	h.join(2, "")
	h.expect("attempt 1 with all three", h.started, call{0, 1}, call{1, 1}, call{2, 1})
	if got := h.lastStart(2); got != (Start{Attempt: 1, Node: 2, Nodes: 3}) {
		t.Errorf("worker 2's attempt 1: %+v; want node 2 of 3", got)
	}
}
