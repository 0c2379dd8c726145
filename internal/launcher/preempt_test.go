package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/preempt"
)

// preemptHarness is a harness whose launcher has a preemption notice in a private folder,
// given to the ranks as preempt.EnvFile, and a channel to preempt it.
func preemptHarness(t *testing.T, script string, grace int64) (*harness, *preempt.Notice, chan string) {
	t.Helper()
	job := makeJob(t, script).workers(2).grace(grace).obj(t)
	h := newHarness(t, job)
	n := preempt.New(t.TempDir())
	why := make(chan string, 1)
	h.l.Notice, h.l.Preempt = n, why
	h.l.ExtraEnv = map[string]string{preempt.EnvFile: n.Path()}
	return h, n, why
}

// Ranks that hear the notice get until its deadline to save: the gang is stopped once a
// checkpoint reported after the notice is committed, not before, and the run ends
// interrupted (even though the ranks would have gone on), counted as a preemption.
func TestPreemptionWaitsForTheCommit(t *testing.T) {
	// Each rank waits for the notice, then says it saw it and goes on "training".
	h, n, why := preemptHarness(t, `while [ ! -e "$TRAINYARD_PREEMPTION_FILE" ]; do sleep 0.05; done
cat "$TRAINYARD_PREEMPTION_FILE" > "saw-$RANK"; exec sleep 300`, 20)
	n.Heard()
	dir := h.l.Job.Spec.WorkingDir
	committed := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		why <- "SIGTERM"
		waitFor(t, filepath.Join(dir, "saw-0"), filepath.Join(dir, "saw-1"))
		time.Sleep(300 * time.Millisecond) // the ranks must not be stopped meanwhile
		now := time.Now()
		n.Committed("checkpoint_000007", now)
		committed <- now
	}()
	res, took := h.run(t, context.Background())
	if res.Outcome != Interrupted || !strings.Contains(res.Reason, "SIGTERM; checkpoint_000007 committed after the notice") {
		t.Fatalf("got %s: %q, want interrupted after the commit", res.Outcome, res.Reason)
	}
	at := <-committed
	for _, r := range h.l.Folder.Record().Attempts[0].Ranks {
		if r.Ended == nil || r.Ended.Before(at) || r.Signal != "SIGTERM" {
			t.Errorf("rank %d ended %v by %q; want SIGTERM after the commit at %v", r.Rank, r.Ended, r.Signal, at)
		}
	}
	if took > 15*time.Second {
		t.Errorf("the run took %s: it waited for the deadline, not the commit", took)
	}
	c, ok, err := preempt.Read(n.Path())
	if err != nil || !ok || c.Reason != "SIGTERM" {
		t.Fatalf("notice: %+v %v %v", c, ok, err)
	}
	if left := time.Until(time.Unix(0, int64(c.Deadline*1e9))); left < 10*time.Second {
		t.Errorf("the notice's deadline was %s away, want about the 20 s grace period less 3 s", left)
	}
	if rec := h.l.Folder.Record(); rec.Preemptions != 1 || rec.Phase != "Interrupted" {
		t.Errorf("run.json: phase %s, preemptions %d; want Interrupted, 1", rec.Phase, rec.Preemptions)
	}
	if out := h.out.String(); !strings.Contains(out, "SIGTERM: the ranks have until") {
		t.Errorf("console does not announce the notice:\n%s", out)
	}
}

// Without a commit, the gang is stopped at the deadline; ranks that exit after the
// notice end the run interrupted, not succeeded.
func TestPreemptionDeadline(t *testing.T) {
	h, n, why := preemptHarness(t, `if [ "$RANK" = 1 ]; then while [ ! -e "$TRAINYARD_PREEMPTION_FILE" ]; do sleep 0.05; done; exit 0; fi
exec sleep 300`, 3)
	n.Heard()
	why <- "SIGHUP"
	res, took := h.run(t, context.Background())
	if res.Outcome != Interrupted || !strings.Contains(res.Reason, "(SIGHUP; rank 1") {
		t.Fatalf("got %s: %q, want interrupted when rank 1 exited after the notice", res.Outcome, res.Reason)
	}
	if took > 10*time.Second {
		t.Errorf("took %s", took)
	}

	h, n, why = preemptHarness(t, `exec sleep 300`, 3)
	n.Heard()
	why <- "SIGTERM"
	start := time.Now()
	res, _ = h.run(t, context.Background())
	if res.Outcome != Interrupted || !strings.Contains(res.Reason, "no checkpoint committed after the notice") {
		t.Fatalf("got %s: %q, want interrupted at the deadline", res.Outcome, res.Reason)
	}
	if d := preempt.Deadline(start, 3*time.Second).Sub(start); time.Since(start) < d {
		t.Errorf("stopped after %s, before the deadline (%s)", time.Since(start), d)
	}
}

// Ranks that never reported through the helper cannot hear the notice: they are stopped at
// once, as before, and a failed rank's restart is not made after a preemption.
func TestPreemptionOfRanksThatCannotHear(t *testing.T) {
	h, _, why := preemptHarness(t, `exec sleep 300`, 20)
	h.l.Job.Spec.MaxRestarts = 3
	why <- "SIGTERM"
	res, took := h.run(t, context.Background())
	if res.Outcome != Interrupted || res.Reason != "preempted in attempt 1 (SIGTERM)" || res.Attempts != 1 {
		t.Fatalf("got %+v", res)
	}
	if took > 5*time.Second {
		t.Errorf("took %s; want an immediate stop", took)
	}
	if _, err := os.Stat(h.l.Notice.Path()); !os.IsNotExist(err) {
		t.Errorf("a notice was posted: %v", err)
	}
}

func waitFor(t *testing.T, paths ...string) {
	for _, p := range paths {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(p); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s never appeared", p)
				return
			}
		}
	}
}
