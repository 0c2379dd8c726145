package jobs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// submitAt submits a job of the given priority.
func (e *env) submitAt(priority int, script, cpus string) *store.Job {
	e.t.Helper()
	j, err := e.svc.Submit(Submission{Job: e.job(script, cpus), Priority: priority})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitForFile waits until a file the test's jobs write exists.
func (e *env) waitForFile(path string) {
	e.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	e.t.Fatalf("%s was not written within 60s", path)
}

// stopOnCleanup stops the job's supervisor if it still runs when the test ends (a test
// that failed half-way), so that its gang does not outlive the test.
func (e *env) stopOnCleanup(id string) {
	e.t.Cleanup(func() {
		if j, err := e.store.Get(id); err == nil && e.svc.supervising(j) {
			_ = syscall.Kill(j.SupervisorPID, syscall.SIGTERM)
		}
	})
}

// resumable is a job's script that sleeps the first time it runs (touching marker) and
// says "resumed" and succeeds the second.
func resumable(marker string) string {
	return "if [ -e " + marker + " ]; then echo resumed; exit 0; fi; touch " + marker + "; exec sleep 300"
}

// checkRequeued checks a job just queued again by a preemption for job hi.
func checkRequeued(t *testing.T, j *store.Job, hi *store.Job) {
	t.Helper()
	want := "preempted by job " + hi.ID + " (priority 5); requeued, resumes from its latest checkpoint (preemption 1)"
	if j.Preemptions != 1 || j.Restarts != 0 || !strings.HasPrefix(j.Message, want) {
		t.Errorf("requeued job: %d preemption(s), %d restart(s), message %q; want 1, 0, %q", j.Preemptions, j.Restarts, j.Message, want)
	}
	if p := j.Preemption; p == nil || p.For != hi.ID || p.ForPriority != 5 || !p.Signalled || p.Requeued == nil || p.Resumed != nil {
		t.Errorf("requeued job's preemption: %+v; want for %s, priority 5, signalled, requeued, not resumed", p, hi.ID)
	}
	if j.GPUs != nil || j.StartedAt != nil || j.SupervisorPID != 0 {
		t.Errorf("requeued job still holds GPUs %v, started %v, supervisor %d", j.GPUs, j.StartedAt, j.SupervisorPID)
	}
}

// checkResumed checks that a job preempted once ran again after hi, in the same run
// folder, resuming: a second attempt after the interrupted first, and no restart used.
func checkResumed(t *testing.T, done, first, hi *store.Job) {
	t.Helper()
	if done.Status != store.Succeeded || done.Preemptions != 1 || done.Restarts != 0 {
		t.Fatalf("preempted job %s (%s) after %d preemption(s) and %d restart(s); want SUCCEEDED, 1, 0",
			done.Status, done.Message, done.Preemptions, done.Restarts)
	}
	rec, err := rundir.ReadRecord(done.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	if done.RunDir != first.RunDir || len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != outcomeInterrupted {
		t.Errorf("run folder %s (was %s) with %d attempt(s), the first %q; want the same folder, 2 attempts, the first interrupted",
			done.RunDir, first.RunDir, len(rec.Attempts), rec.Attempts[0].Outcome)
	}
	if done.Preemption == nil || done.Preemption.Resumed == nil || hi.EndedAt == nil || done.StartedAt.Before(*hi.EndedAt) {
		t.Errorf("the preempted job resumed at %v (preemption %+v), the job it made room for ended at %v",
			done.StartedAt, done.Preemption, hi.EndedAt)
	}
	if log, _ := os.ReadFile(LogPath(done)); !strings.Contains(string(log), "resumed") {
		t.Errorf("console log does not say the job resumed:\n%s", log)
	}
}

// A job of priority 5 submitted while one of priority 0 holds the machine's CPUs: the
// low job's supervisor gets SIGTERM, the job goes back to the queue (a preemption, not a
// restart), the high job runs, then the low job runs again and resumes its run.
func TestPreemptionRequeuesLowerPriority(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), preemption: scheduler.PreemptLowerPriority}
	e.open()
	t.Cleanup(e.close)
	marker := filepath.Join(e.dir, "first-run")
	low := e.submitAt(0, resumable(marker), "2")
	e.stopOnCleanup(low.ID)
	first := e.waitFor(low.ID, store.Running)
	e.waitForFile(marker)
	hi := e.submitAt(5, "echo high ran; sleep 1", "2")
	checkRequeued(t, e.waitFor(low.ID, store.Pending), hi)
	hiDone := e.waitFor(hi.ID, store.Succeeded, store.Failed)
	if hiDone.Status != store.Succeeded || hiDone.Preemptions != 0 {
		t.Fatalf("high job %s (%s), %d preemption(s); want SUCCEEDED, 0", hiDone.Status, hiDone.Message, hiDone.Preemptions)
	}
	checkResumed(t, e.waitFor(low.ID, store.Succeeded, store.Failed), first, hiDone)
}

// While a preempted job stops, the room it frees is kept for the job it was preempted
// for: a small job that fits beside it now waits behind the head instead of taking it.
func TestPreemptionRoomIsNotBackfilled(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), preemption: scheduler.PreemptLowerPriority}
	e.open()
	t.Cleanup(e.close)
	marker := filepath.Join(e.dir, "first-run")
	// The first run takes 2 s to stop after SIGTERM, as a rank saving a checkpoint would.
	low := e.submitAt(0, "if [ -e "+marker+" ]; then echo resumed; exit 0; fi; trap 'sleep 2; exit 143' TERM; touch "+
		marker+"; sleep 300 & wait $!", "1")
	e.stopOnCleanup(low.ID)
	e.waitFor(low.ID, store.Running)
	e.waitForFile(marker)
	hi := e.submitAt(5, "sleep 1", "2")
	small := e.submitAt(0, "true", "1") // fits in the free core now
	want := "waiting behind job " + hi.ID + " (priority 5, higher than 0)"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		j, _ := e.store.Get(small.ID)
		l, _ := e.store.Get(low.ID)
		if j.Status == store.Pending && j.Message == want && l.Preempting() {
			break
		}
		if j.Status != store.Pending || l.Preemptions > 0 || time.Now().After(deadline) {
			t.Fatalf("small job %s %q while the low job is %s (preempting %v); want it waiting behind the high job",
				j.Status, j.Message, l.Status, l.Preempting())
		}
	}
	hiDone := e.waitFor(hi.ID, store.Succeeded, store.Failed)
	smallDone := e.waitFor(small.ID, store.Succeeded, store.Failed)
	if smallDone.StartedAt.Before(*hiDone.StartedAt) {
		t.Errorf("the small job started at %v, before the high job it waited behind (%v)", smallDone.StartedAt, hiDone.StartedAt)
	}
	if done := e.waitFor(low.ID, store.Succeeded, store.Failed); done.Status != store.Succeeded || done.Preemptions != 1 {
		t.Errorf("low job %s (%s) after %d preemption(s); want SUCCEEDED after 1", done.Status, done.Message, done.Preemptions)
	}
}

// With the policy never (the zero Config), the high job waits for the low one to end.
func TestPreemptionNever(t *testing.T) {
	e := newEnv(t)
	low := e.submitAt(0, "exec sleep 300", "2")
	e.stopOnCleanup(low.ID)
	e.waitFor(low.ID, store.Running)
	hi := e.submitAt(5, "true", "2")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		j, _ := e.store.Get(hi.ID)
		if j.Status == store.Pending && j.Message == "needs 2 CPUs, 0 free" {
			break
		}
		if j.Status != store.Pending || time.Now().After(deadline) {
			t.Fatalf("high job: %s %q; want pending, needing 2 CPUs", j.Status, j.Message)
		}
	}
	time.Sleep(200 * time.Millisecond) // a few rounds of the scheduler
	if j, _ := e.store.Get(low.ID); j.Status != store.Running || j.Preemption != nil || j.StopRequested {
		t.Fatalf("low job %s, preemption %+v; want RUNNING, none", j.Status, j.Preemption)
	}
	if _, err := e.svc.Stop(low.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor(hi.ID, store.Succeeded)
}

// A server that dies after recording a preemption and before signalling the supervisor:
// the job runs on, its preemption recorded; the next server signals it, and the job is
// requeued and resumes as if nothing had happened.
func TestCrashAfterPreemptRecordSignalsOnRestart(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), setup: crashAt(FaultAfterPreemptRecord), preemption: scheduler.PreemptLowerPriority}
	e.open()
	t.Cleanup(e.close)
	marker := filepath.Join(e.dir, "first-run")
	low := e.submitAt(0, resumable(marker), "2")
	e.stopOnCleanup(low.ID)
	first := e.waitFor(low.ID, store.Running)
	e.waitForFile(marker)
	hi := e.submitAt(5, "echo high ran", "2")
	e.crashed()
	marked, err := e.store.Get(low.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !marked.Preempting() || marked.Preemption.Signalled || !e.svc.supervising(marked) {
		t.Fatalf("after the crash: %s, preemption %+v, supervisor %d alive %v; want RUNNING, preempted, not signalled, alive",
			marked.Status, marked.Preemption, marked.SupervisorPID, e.svc.supervising(marked))
	}
	waiting, _ := e.store.Get(hi.ID)
	if want := "needs 2 CPUs, 0 free; preempting job " + low.ID + " (priority 0) to make room"; waiting.Message != want {
		t.Errorf("high job's message %q, want %q", waiting.Message, want)
	}
	e.restart()
	checkRequeued(t, e.waitFor(low.ID, store.Pending), hi)
	hiDone := e.waitFor(hi.ID, store.Succeeded, store.Failed)
	checkResumed(t, e.waitFor(low.ID, store.Succeeded, store.Failed), first, hiDone)
}

// How the end of a preempted job's supervisor leaves the job, and how restarts are
// counted around preemptions.
func TestEndedPreempted(t *testing.T) {
	interrupted := exec.Command("sh", "-c", "exit 130").Run() // as the launcher exits once interrupted
	if interrupted == nil {
		t.Fatal("want an error")
	}
	const requeued = "preempted by job hi (priority 5); requeued, resumes from its latest checkpoint (preemption 1)"
	type attempt = rundir.Attempt
	cases := map[string]struct {
		phase       v1.JobPhase
		attempts    []attempt
		restarts    int
		maxRestarts int32
		preempted   bool
		stop        bool
		waitErr     error
		want        store.Status
		wantMsg     string // a part of the message
		wantUsed    int
		wantPreempt int
	}{
		"preempted": {phase: v1.PhaseInterrupted, attempts: []attempt{{Outcome: "interrupted"}}, preempted: true,
			waitErr: interrupted, want: store.Pending, wantMsg: requeued, wantPreempt: 1},
		"preempted before its first attempt": {preempted: true, want: store.Pending, wantMsg: requeued, wantPreempt: 1},
		"preempted after a restart of its own": {phase: v1.PhaseInterrupted, maxRestarts: 3, preempted: true,
			attempts: []attempt{{Outcome: "failed"}, {Outcome: "interrupted"}}, waitErr: interrupted,
			want: store.Pending, wantMsg: requeued, wantUsed: 1, wantPreempt: 1},
		"preempted but succeeded meanwhile": {phase: v1.PhaseSucceeded, attempts: []attempt{{Outcome: "succeeded"}},
			preempted: true, want: store.Succeeded},
		"preempted but failed meanwhile": {phase: v1.PhaseFailed, attempts: []attempt{{Outcome: "failed"}},
			preempted: true, want: store.Failed},
		"a user's stop wins": {phase: v1.PhaseInterrupted, attempts: []attempt{{Outcome: "interrupted"}}, preempted: true,
			stop: true, waitErr: interrupted, want: store.Stopped, wantMsg: "stopped by a user"},
		"a resumed attempt is no restart": {phase: v1.PhaseRunning, maxRestarts: 1,
			attempts: []attempt{{Outcome: "interrupted"}, {}}, want: store.Pending, wantMsg: "(restart 1 of 1)", wantUsed: 1},
		"not preempted: an interrupted supervisor that exited fails as before": {phase: v1.PhaseInterrupted,
			attempts: []attempt{{Outcome: "interrupted"}}, waitErr: interrupted, want: store.Failed, wantMsg: "ended before the job did"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.phase != "" {
				data, _ := json.Marshal(rundir.Record{Name: "r", Phase: tc.phase, Attempts: tc.attempts})
				if err := os.WriteFile(filepath.Join(dir, rundir.RecordFile), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec, _ := json.Marshal(v1.TrainJob{Spec: v1.TrainJobSpec{MaxRestarts: tc.maxRestarts}})
			started := time.Now()
			j := &store.Job{ID: "j", Status: store.Running, Spec: spec, RunDir: dir, SupervisorPID: 42,
				Restarts: tc.restarts, StopRequested: tc.stop, GPUs: [][]int{{0}}, StartedAt: &started}
			if tc.preempted {
				j.Preemption = &store.Preemption{For: "hi", ForPriority: 5, At: started, Signalled: true}
			}
			ended(j, tc.waitErr, time.Now())
			if j.Status != tc.want || !strings.Contains(j.Message, tc.wantMsg) {
				t.Errorf("%s %q, want %s with %q", j.Status, j.Message, tc.want, tc.wantMsg)
			}
			if j.Preemptions != tc.wantPreempt || (tc.wantPreempt > 0) != (j.Preemption != nil && j.Preemption.Requeued != nil) {
				t.Errorf("%d preemption(s), preemption %+v; want %d", j.Preemptions, j.Preemption, tc.wantPreempt)
			}
			if tc.want != store.Pending {
				return
			}
			type queued struct {
				Restarts, PID int
				GPUs          [][]int
				Started       *time.Time
			}
			if diff := cmp.Diff(queued{Restarts: tc.wantUsed}, queued{j.Restarts, j.SupervisorPID, j.GPUs, j.StartedAt}); diff != "" {
				t.Errorf("queued job (-want +got):\n%s", diff)
			}
		})
	}
}

// A job queued again by a preemption says so while it waits, until it starts again.
func TestWaitingMessageAfterPreemption(t *testing.T) {
	now := time.Now()
	j := &store.Job{ID: "lo", Status: store.Pending, Preemptions: 1,
		Preemption: &store.Preemption{For: "hi", ForPriority: 5, At: now, Signalled: true, Requeued: &now}}
	want := "preempted by job hi (priority 5); requeued, resumes from its latest checkpoint (preemption 1); needs 2 GPUs, 0 free"
	if got := waitingMessage(j, "needs 2 GPUs, 0 free"); got != want {
		t.Errorf("waiting after a preemption: %q, want %q", got, want)
	}
	j.Preemption.Resumed = &now
	if got := waitingMessage(j, "needs 2 GPUs, 0 free"); got != "needs 2 GPUs, 0 free" {
		t.Errorf("waiting after it resumed since: %q", got)
	}
}
