package jobs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// crashAt makes a Service's Run goroutine end at a fault point, as if the server died
// there: nothing after it runs, and the store and the processes stay as they are.
func crashAt(point string) func(*Service) {
	return func(s *Service) {
		s.crash = func(p string) {
			if p == point {
				runtime.Goexit()
			}
		}
	}
}

// crashed waits until the env's Service died at its fault point.
func (e *env) crashed() {
	e.t.Helper()
	select {
	case <-e.stopped:
	case <-time.After(60 * time.Second):
		e.t.Fatal("the service did not reach its fault point within 60s")
	}
}

// restart starts a Service without a fault on the env's state folder.
func (e *env) restart() {
	e.t.Helper()
	e.close()
	e.setup = nil
	e.open()
}

// lines returns the lines of a file the test's jobs append to.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// attempts returns how many attempts the job's run record holds.
func attempts(t *testing.T, j *store.Job) int {
	t.Helper()
	rec, err := rundir.ReadRecord(j.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	return len(rec.Attempts)
}

// A server that dies after recording a placement and before starting its supervisor:
// the job is RUNNING without a supervisor (its resources stay counted), and the next
// server starts the supervisor, once.
func TestCrashAfterRecordStartsOnce(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), setup: crashAt(FaultAfterRecord)}
	e.open()
	t.Cleanup(e.close)
	starts := filepath.Join(e.dir, "starts")
	j := e.submit("echo start >> "+starts, "")
	e.crashed()
	placed, err := e.store.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if placed.Status != store.Running || placed.SupervisorPID != 0 || placed.StartedAt == nil {
		t.Fatalf("after the crash: %s, supervisor %d, started %v; want RUNNING, 0, a time", placed.Status, placed.SupervisorPID, placed.StartedAt)
	}
	e.restart()
	done := e.waitFor(j.ID, store.Succeeded, store.Failed)
	if done.Status != store.Succeeded {
		t.Fatalf("job %s (%s), want SUCCEEDED", done.Status, done.Message)
	}
	if got := lines(t, starts); len(got) != 1 || attempts(t, done) != 1 {
		t.Errorf("the job ran %d time(s) in %d attempt(s), want once", len(got), attempts(t, done))
	}
}

// A server that dies after starting a supervisor and before recording its pid: the next
// server adopts the running supervisor instead of starting a second one.
func TestCrashAfterLaunchAdopts(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), setup: crashAt(FaultAfterLaunch)}
	e.open()
	t.Cleanup(e.close)
	starts, gate := filepath.Join(e.dir, "starts"), filepath.Join(e.dir, "go")
	j := e.submit("echo start >> "+starts+"; while [ ! -e "+gate+" ]; do sleep 0.1; done", "")
	e.crashed()
	pid := e.supervisorOf(j)
	t.Cleanup(func() { // the dead Service's child: this process must reap it
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_, _ = syscall.Wait4(pid, nil, 0, nil)
	})
	if placed, _ := e.store.Get(j.ID); placed.Status != store.Running || placed.SupervisorPID != 0 {
		t.Fatalf("after the crash: %s, supervisor %d; want RUNNING, 0", placed.Status, placed.SupervisorPID)
	}
	e.restart()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if adopted, _ := e.store.Get(j.ID); adopted.SupervisorPID == pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted service did not adopt supervisor %d", pid)
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := e.waitFor(j.ID, store.Succeeded, store.Failed)
	if done.Status != store.Succeeded {
		t.Fatalf("job %s (%s), want SUCCEEDED", done.Status, done.Message)
	}
	if got := lines(t, starts); len(got) != 1 || attempts(t, done) != 1 {
		t.Errorf("the job ran %d time(s) in %d attempt(s), want once", len(got), attempts(t, done))
	}
}

// A supervisor started but not recorded that finished while no server ran: the job takes
// its run's outcome, and is not started again (which its finished run folder refuses).
func TestCrashAfterLaunchFinishedMeanwhile(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), setup: crashAt(FaultAfterLaunch)}
	e.open()
	t.Cleanup(e.close)
	starts := filepath.Join(e.dir, "starts")
	j := e.submit("echo start >> "+starts, "")
	e.crashed()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if runFinished(filepath.Join(e.dir, "runs", j.ID)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish within 60s")
		}
	}
	e.restart()
	done := e.waitFor(j.ID, store.Succeeded, store.Failed)
	if done.Status != store.Succeeded {
		t.Fatalf("job %s (%s), want SUCCEEDED", done.Status, done.Message)
	}
	if got := lines(t, starts); len(got) != 1 {
		t.Errorf("the job ran %d times, want once", len(got))
	}
}

// supervisorOf waits until the job's run record names its supervisor, and returns it.
func (e *env) supervisorOf(j *store.Job) int {
	e.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rec, err := rundir.ReadRecord(filepath.Join(e.dir, "runs", j.ID)); err == nil && rec.Supervisor > 0 {
			return rec.Supervisor
		}
	}
	e.t.Fatal("the job's supervisor did not start within 60s")
	return 0
}

// A supervisor killed (SIGKILL) while the server is down, for a job with a restart left:
// the job is queued again and its new supervisor continues the same run folder with a
// new attempt.
func TestDeadSupervisorRestarts(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(e.dir, "first-run")
	job := e.job("if [ -e "+marker+" ]; then echo second run; exit 0; fi; touch "+marker+"; exec sleep 300", "")
	job.Spec.MaxRestarts = 1
	j, err := e.svc.Submit(Submission{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	running := e.waitFor(j.ID, store.Running)
	pid := e.supervisorOf(j)
	// The first run must have begun before its supervisor dies, or the second would be the
	// first and sleep.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's first run did not begin")
		}
	}
	running = e.supervised(j.ID)
	e.close()
	if err := syscall.Kill(running.SupervisorPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.open()
	done := e.waitFor(j.ID, store.Succeeded, store.Failed)
	if done.Status != store.Succeeded || done.Restarts != 1 || attempts(t, done) != 2 {
		t.Fatalf("job %s (%s) after %d restart(s), %d attempt(s); want SUCCEEDED after 1 restart, 2 attempts",
			done.Status, done.Message, done.Restarts, attempts(t, done))
	}
	log, _ := os.ReadFile(LogPath(done))
	if !strings.Contains(string(log), "second run") || pid != running.SupervisorPID {
		t.Errorf("supervisor %d (run record: %d); console log:\n%s", running.SupervisorPID, pid, log)
	}
}

// How the end of a supervisor that wrote no final phase leaves its job.
func TestEnded(t *testing.T) {
	exitErr := func(script string) error {
		err := exec.Command("sh", "-c", script).Run()
		if err == nil {
			t.Fatal("want an error")
		}
		return err
	}
	exited, killed := exitErr("exit 3"), exitErr("kill -9 $$")
	const dead = "its supervisor (pid 42) died; restarting from its latest checkpoint (restart 1 of 2)"
	cases := map[string]struct {
		phase       v1.JobPhase
		attempts    int
		restarts    int
		maxRestarts int32
		stop        bool
		waitErr     error
		want        store.Status
		wantMsg     string // a part of the message
		wantUsed    int
	}{
		"died unwatched":            {phase: v1.PhaseRunning, attempts: 1, maxRestarts: 2, want: store.Pending, wantMsg: dead, wantUsed: 1},
		"died before an attempt":    {maxRestarts: 2, want: store.Pending, wantMsg: dead, wantUsed: 1},
		"killed while watched":      {phase: v1.PhaseRunning, attempts: 1, maxRestarts: 2, waitErr: killed, want: store.Pending, wantMsg: "died (signal: killed); restarting", wantUsed: 1},
		"interrupted":               {phase: v1.PhaseInterrupted, attempts: 1, maxRestarts: 2, want: store.Pending, wantMsg: "was interrupted; restarting", wantUsed: 1},
		"restarts of supervisors":   {phase: v1.PhaseRestarting, attempts: 2, maxRestarts: 2, want: store.Pending, wantMsg: "(restart 2 of 2)", wantUsed: 2},
		"restarts of the server":    {phase: v1.PhaseRunning, attempts: 2, restarts: 2, maxRestarts: 3, want: store.Pending, wantMsg: "(restart 3 of 3)", wantUsed: 3},
		"no restarts left":          {phase: v1.PhaseRunning, attempts: 3, maxRestarts: 2, want: store.Failed, wantMsg: "ended before the job did; no restarts left (max restarts 2)"},
		"no restarts at all":        {phase: v1.PhaseRunning, attempts: 1, want: store.Failed, wantMsg: "its supervisor (pid 42) ended before the job did"},
		"exited by itself":          {maxRestarts: 2, waitErr: exited, want: store.Failed, wantMsg: "ended before the job did (exit status 3)"},
		"stopped by a user":         {phase: v1.PhaseInterrupted, attempts: 1, maxRestarts: 2, stop: true, want: store.Stopped, wantMsg: "stopped by a user"},
		"succeeded while unwatched": {phase: v1.PhaseSucceeded, attempts: 1, maxRestarts: 2, want: store.Succeeded},
		"failed for good":           {phase: v1.PhaseFailed, attempts: 3, maxRestarts: 2, want: store.Failed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.phase != "" {
				rec := rundir.Record{Name: "r", Phase: tc.phase, Attempts: make([]rundir.Attempt, tc.attempts)}
				data, _ := json.Marshal(rec)
				if err := os.WriteFile(filepath.Join(dir, rundir.RecordFile), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec, _ := json.Marshal(v1.TrainJob{Spec: v1.TrainJobSpec{MaxRestarts: tc.maxRestarts}})
			started := time.Now()
			j := &store.Job{ID: "j", Status: store.Running, Spec: spec, RunDir: dir, SupervisorPID: 42,
				Restarts: tc.restarts, StopRequested: tc.stop, GPUs: [][]int{{0}}, StartedAt: &started}
			ended(j, tc.waitErr, time.Now())
			if j.Status != tc.want || !strings.Contains(j.Message, tc.wantMsg) {
				t.Errorf("%s %q, want %s with %q", j.Status, j.Message, tc.want, tc.wantMsg)
			}
			if tc.want != store.Pending {
				return
			}
			got := struct {
				Restarts, PID int
				GPUs          [][]int
				Started       *time.Time
			}{j.Restarts, j.SupervisorPID, j.GPUs, j.StartedAt}
			if diff := cmp.Diff(struct {
				Restarts, PID int
				GPUs          [][]int
				Started       *time.Time
			}{Restarts: tc.wantUsed}, got); diff != "" {
				t.Errorf("queued job (-want +got):\n%s", diff)
			}
		})
	}
}
