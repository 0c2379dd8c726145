package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/device"
)

func deviceNone() device.Inventory { return device.Inventory{Source: "none: test"} }

func TestGangSucceeds(t *testing.T) {
	job := makeJob(t, `echo "hello from $RANK"`).workers(2).procs(2).obj(t)
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Succeeded || res.Attempts != 1 {
		t.Fatalf("got %+v, want success in one attempt\n%s", res, h.out)
	}
	for rank := range 4 {
		log, err := os.ReadFile(filepath.Join(h.l.Folder.Dir, "logs", "attempt-1", "rank-"+strconv.Itoa(rank)+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "hello from " + strconv.Itoa(rank) + "\n"; string(log) != want {
			t.Errorf("rank %d log = %q, want %q", rank, log, want)
		}
		if !strings.Contains(h.out.String(), "] hello from "+strconv.Itoa(rank)) {
			t.Errorf("console lacks rank %d's line:\n%s", rank, h.out)
		}
	}
	rec := h.l.Folder.Record()
	if rec.Phase != "Succeeded" || len(rec.Attempts) != 1 || len(rec.Attempts[0].Ranks) != 4 {
		t.Errorf("record = %+v", rec)
	}
}

// A rank that crashes brings the whole gang down at once, not when the others finish.
func TestCrashTearsDownGang(t *testing.T) {
	job := makeJob(t, `if [ "$RANK" = 2 ]; then sleep 0.5; exit 3; fi; exec sleep 300`).workers(3).obj(t)
	h := newHarness(t, job)
	res, took := h.run(t, context.Background())
	if res.Outcome != Failed || res.Last.FailedRank != 2 || res.Last.ExitCode != 3 || res.Last.Hung {
		t.Fatalf("got %+v, want failure of rank 2 with exit code 3\n%s", res, h.out)
	}
	if !strings.Contains(res.Reason, "rank 2 (worker 2, pid") || !strings.Contains(res.Reason, "exited with code 3") {
		t.Errorf("reason %q does not name rank 2 and its exit code", res.Reason)
	}
	// Generous bounds: teardown takes milliseconds when workers obey SIGTERM.
	if res.Last.Teardown > 3*time.Second || took > 20*time.Second {
		t.Errorf("teardown %s, run %s: the gang was not torn down promptly", res.Last.Teardown, took)
	}
	ranks := h.l.Folder.Record().Attempts[0].Ranks
	for _, r := range ranks {
		if r.Rank == 2 {
			if r.ExitCode == nil || *r.ExitCode != 3 || r.StoppedByTrainyard {
				t.Errorf("rank 2 record = %+v, want exit code 3 of its own", r)
			}
			continue
		}
		if r.Signal != "SIGTERM" || !r.StoppedByTrainyard {
			t.Errorf("rank %d record = %+v, want stopped by trainyard with SIGTERM", r.Rank, r)
		}
	}
}

func TestRestartsExactlyK(t *testing.T) {
	// Rank 1 fails only once rank 0 wrote its line of the attempt: else the gang may be torn
	// down (fail-fast) before rank 0's shell has run its echo.
	job := makeJob(t, `echo "$TRAINYARD_ATTEMPT $TORCHELASTIC_RESTART_COUNT $MASTER_PORT" >> attempts-$RANK
if [ "$RANK" = 1 ]; then until grep -q "^$TRAINYARD_ATTEMPT " attempts-0 2>/dev/null; do sleep 0.01; done; fi
exit 1`).
		workers(2).restarts(2).obj(t)
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Failed || res.Attempts != 3 {
		t.Fatalf("got %+v, want failure after 3 attempts\n%s", res, h.out)
	}
	if !strings.Contains(res.Reason, "in attempt 3 of 3; no restarts left (max restarts 2)") {
		t.Errorf("reason = %q", res.Reason)
	}
	data, err := os.ReadFile(filepath.Join(job.Spec.WorkingDir, "attempts-0"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var attempts, ports []string
	for _, l := range lines {
		f := strings.Fields(l)
		attempts = append(attempts, f[0]+"/"+f[1])
		ports = append(ports, f[2])
	}
	if diff := cmp.Diff([]string{"1/0", "2/1", "3/2"}, attempts); diff != "" {
		t.Errorf("TRAINYARD_ATTEMPT/TORCHELASTIC_RESTART_COUNT seen by rank 0 (-want +got):\n%s", diff)
	}
	if got := len(h.l.Folder.Record().Attempts); got != 3 {
		t.Errorf("run record has %d attempts, want 3", got)
	}
	if ports[0] == ports[1] && ports[1] == ports[2] {
		t.Logf("all attempts got port %s (allowed, but unlikely)", ports[0])
	}
}

// A worker that ignores SIGTERM is killed once the grace period is over.
func TestIgnoredSIGTERMIsKilled(t *testing.T) {
	job := makeJob(t, `if [ "$RANK" = 1 ]; then sleep 0.3; exit 1; fi; trap '' TERM; sleep 300`).
		workers(2).grace(1).obj(t)
	h := newHarness(t, job)
	res, took := h.run(t, context.Background())
	if res.Outcome != Failed {
		t.Fatalf("got %+v, want failure", res)
	}
	r0 := h.l.Folder.Record().Attempts[0].Ranks[0]
	if r0.Signal != "SIGKILL" {
		t.Errorf("rank 0 ended with %+v, want SIGKILL", r0)
	}
	if res.Last.Teardown < time.Second || took > 30*time.Second {
		t.Errorf("teardown took %s (run %s); want the 1s grace period, then a kill", res.Last.Teardown, took)
	}
}

// No process of the gang survives it, children of workers included.
func TestNoOrphans(t *testing.T) {
	job := makeJob(t, `sleep 300 & echo $! > child-$RANK; trap '' TERM; if [ "$RANK" = 1 ]; then sleep 0.5; exit 1; fi; wait`).
		workers(2).grace(1).obj(t)
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Failed {
		t.Fatalf("got %+v, want failure", res)
	}
	for _, r := range h.l.Folder.Record().Attempts[0].Ranks {
		if !gone(-r.PID) {
			t.Errorf("process group %d of rank %d still has live members", r.PID, r.Rank)
		}
		data, err := os.ReadFile(filepath.Join(job.Spec.WorkingDir, "child-"+strconv.Itoa(r.Rank)))
		if err != nil {
			t.Fatal(err)
		}
		child, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		if !gone(child) {
			t.Errorf("child %d of rank %d survived the gang", child, r.Rank)
		}
	}
}

func TestInterrupt(t *testing.T) {
	job := makeJob(t, `echo started; exec sleep 300`).workers(2).restarts(3).obj(t)
	h := newHarness(t, job)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !strings.Contains(h.out.String(), "started") {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	res, _ := h.run(t, ctx)
	if res.Outcome != Interrupted || res.Attempts != 1 {
		t.Fatalf("got %+v, want interrupted in attempt 1 with no restart", res)
	}
	if rec := h.l.Folder.Record(); rec.Phase != "Interrupted" {
		t.Errorf("phase = %s, want Interrupted", rec.Phase)
	}
}

// A command that vanished between preflight and start fails the attempt cleanly.
func TestStartFailure(t *testing.T) {
	job := makeJob(t, `exit 0`).workers(2).obj(t)
	h := newHarness(t, job)
	if err := os.Chmod(job.Spec.Command[0], 0o644); err != nil {
		t.Fatal(err)
	}
	h.l.path = job.Spec.Command[0]
	res, err := h.l.RunAttempt(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	h.console.Close()
	if res.Outcome != Failed || !strings.Contains(res.Reason, "could not run") {
		t.Errorf("got %+v, want a failure that says the command could not run", res)
	}
}

// gone waits up to 5 s until no live process has the pid (or, negative, the process group):
// SIGKILL is delivered asynchronously, and a killed orphan stays a zombie until its new
// parent reaps it, which does not make it a survivor.
func gone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || (pid > 0 && zombie(pid)) {
			return true
		}
	}
	return false
}

func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "123 (sleep) Z ...".
	_, after, _ := strings.Cut(string(data), ") ")
	return strings.HasPrefix(after, "Z")
}

// A frozen rank (SIGSTOP) with silent peers is caught by the hang timeout instead of
// stalling the job until a collective times out, and the gang is restarted.
func TestHangTimeout(t *testing.T) {
	job := makeJob(t, `echo "attempt $TRAINYARD_ATTEMPT"; if [ "$RANK" = 1 ]; then kill -STOP $$; fi; sleep 0.3; echo "still here"; exec sleep 300`).
		workers(2).hangTimeout(1).restarts(1).obj(t)
	h := newHarness(t, job)
	res, took := h.run(t, context.Background())
	if res.Outcome != Failed || res.Attempts != 2 || !res.Last.Hung || res.Last.FailedRank != -1 || res.Last.ExitCode != -1 {
		t.Fatalf("got %+v, want failure after 2 hung attempts\n%s", res, h.out)
	}
	if !strings.Contains(res.Reason, "no rank printed or reported anything for 1s") ||
		!strings.Contains(res.Reason, "; rank 1 went quiet first (nothing for 1.") {
		t.Errorf("reason = %q; want it to say rank 1 went quiet first", res.Reason)
	}
	if took > 30*time.Second {
		t.Errorf("two hung attempts took %s to be caught", took)
	}
	for _, r := range h.l.Folder.Record().Attempts[1].Ranks {
		if r.Signal != "SIGTERM" || !gone(-r.PID) {
			t.Errorf("rank %d ended with %+v; want stopped by SIGTERM (a stopped rank is resumed to take it)", r.Rank, r)
		}
	}
}

// Reports and output keep a quiet gang from counting as hung.
func TestHangTimeoutTouch(t *testing.T) {
	job := makeJob(t, `sleep 2.5`).hangTimeout(1).obj(t)
	h := newHarness(t, job)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				h.l.Touch()
			}
		}
	}()
	if res, _ := h.run(t, context.Background()); res.Outcome != Succeeded {
		t.Errorf("got %+v, want success: reports were arriving", res)
	}
}
