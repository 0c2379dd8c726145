package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/shell"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/testbinary"
)

var binary string // trainyard, built once for the supervisors

func TestMain(m *testing.M) { testbinary.Main(m, &binary) }

// env is a Service over a fresh store on a machine with 2 cores and no GPU.
type env struct {
	t       *testing.T
	dir     string
	store   *store.Store
	svc     *Service
	cancel  context.CancelFunc
	stopped chan struct{}
	// setup, when set, changes each Service that open makes before it runs.
	setup func(*Service)
	// preemption is the Services' Config.Preemption.
	preemption scheduler.PreemptionPolicy
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.open()
	t.Cleanup(e.close)
	return e
}

// open starts a Service (again) on the env's state folder: a server start or restart.
func (e *env) open() {
	e.t.Helper()
	st, err := store.Open(filepath.Join(e.dir, "state", "jobs.db"), store.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := New(Config{Store: st, StateDir: filepath.Join(e.dir, "state"), Binary: binary,
		Node: scheduler.Node{MilliCPU: 2000, MemoryBytes: 8 << 30}, Poll: 50 * time.Millisecond, Preemption: e.preemption})
	if err != nil {
		e.t.Fatal(err)
	}
	if e.setup != nil {
		e.setup(svc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.store, e.svc, e.cancel, e.stopped = st, svc, cancel, make(chan struct{})
	go func() {
		defer close(e.stopped)
		if err := svc.Run(ctx); err != nil {
			e.t.Error(err)
		}
	}()
}

// close stops the Service (not its supervisors) and closes the store: a server stop.
func (e *env) close() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	<-e.stopped
	e.store.Close()
	e.cancel = nil
}

// job builds a valid job that runs a shell command, with cpus cores per worker.
func (e *env) job(script string, cpus string) *v1.TrainJob {
	e.t.Helper()
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"sh", "-c", script},
		StoragePath: filepath.Join(e.dir, "runs"), WorkingDir: e.dir}}
	if cpus != "" {
		q := resource.MustParse(cpus)
		job.Spec.Resources.CPU = &q
	}
	if err := jobspec.Default(job, jobspec.Env{WorkDir: e.dir}); err != nil {
		e.t.Fatal(err)
	}
	if err := jobspec.Validate(job); err != nil {
		e.t.Fatal(err)
	}
	return job
}

// supervised waits until the job runs with its supervisor's pid recorded (a record read
// as RUNNING may predate the pid, and signalling pid 0 would hit this test's own group).
func (e *env) supervised(id string) *store.Job {
	e.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if j, err := e.store.Get(id); err == nil && j.Status == store.Running && j.SupervisorPID > 0 {
			return j
		}
	}
	e.t.Fatalf("job %s has no recorded supervisor within 60s", id)
	return nil
}

func (e *env) submit(script, cpus string) *store.Job {
	e.t.Helper()
	j, err := e.svc.Submit(Submission{Job: e.job(script, cpus)})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitFor waits until the job's status is one of want.
func (e *env) waitFor(id string, want ...store.Status) *store.Job {
	e.t.Helper()
	var j *store.Job
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if j, err = e.store.Get(id); err != nil {
			e.t.Fatal(err)
		}
		for _, w := range want {
			if j.Status == w {
				return j
			}
		}
	}
	e.t.Fatalf("job %s is %s (%s), want %v", id, j.Status, j.Message, want)
	return nil
}

func TestJobRunsAndSucceeds(t *testing.T) {
	e := newEnv(t)
	j := e.submit("echo hello from $RANK", "")
	done := e.waitFor(j.ID, store.Succeeded)
	log, _ := os.ReadFile(LogPath(done))
	if !strings.Contains(string(log), "hello from 0") || !strings.Contains(done.Message, "exited 0") {
		t.Errorf("message %q, console log:\n%s", done.Message, log)
	}
}

// Jobs wait until they fit, say why, and start when resources free up; a job that can
// never fit is refused at once.
func TestQueueWaitsForResources(t *testing.T) {
	e := newEnv(t)
	first := e.submit("sleep 3", "2")
	e.waitFor(first.ID, store.Running)
	second := e.submit("true", "1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		j, _ := e.store.Get(second.ID)
		if j.Status == store.Pending && j.Message == "needs 1 CPU, 0 free" {
			break
		}
		if j.Status != store.Pending || time.Now().After(deadline) {
			f, _ := e.store.Get(first.ID)
			t.Fatalf("second job: %s %q; want pending, needing 1 CPU (first: %s %q %s)", j.Status, j.Message, f.Status, f.Message, f.Spec)
		}
	}
	e.waitFor(first.ID, store.Succeeded)
	e.waitFor(second.ID, store.Succeeded)
	_, err := e.svc.Submit(Submission{Job: e.job("true", "3")})
	if !errors.Is(err, ErrNeverFits) || !strings.Contains(err.Error(), "needs 3 CPUs") {
		t.Errorf("a job bigger than the machine: %v", err)
	}
}

func TestStopAndDelete(t *testing.T) {
	e := newEnv(t)
	j := e.submit("echo started; exec sleep 300", "")
	e.waitFor(j.ID, store.Running)
	if err := e.svc.Delete(j.ID); !errors.Is(err, ErrNotFinished) {
		t.Errorf("delete of a running job: %v, want ErrNotFinished", err)
	}
	if _, err := e.svc.Stop(j.ID); err != nil {
		t.Fatal(err)
	}
	stopped := e.waitFor(j.ID, store.Stopped, store.Failed)
	if stopped.Status != store.Stopped {
		t.Errorf("status %s (%s), want STOPPED", stopped.Status, stopped.Message)
	}
	if _, err := e.svc.Stop(j.ID); !errors.Is(err, ErrFinished) {
		t.Errorf("stop of a stopped job: %v, want ErrFinished", err)
	}
	if err := e.svc.Delete(j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Get(j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
}

// A server restart does not touch a running job: the new server re-attaches and sees it
// finish.
func TestRestartReattaches(t *testing.T) {
	e := newEnv(t)
	j := e.submit("sleep 2; echo finished", "")
	running := e.waitFor(j.ID, store.Running)
	e.close()
	e.open()
	done := e.waitFor(j.ID, store.Succeeded)
	if done.StartedAt == nil || !done.StartedAt.Equal(*running.StartedAt) {
		t.Errorf("the job was started again: %v then %v", running.StartedAt, done.StartedAt)
	}
	log, _ := os.ReadFile(LogPath(done))
	if !strings.Contains(string(log), "finished") {
		t.Errorf("console log lost its lines:\n%s", log)
	}
}

// A supervisor that dies (kill -9) marks its job failed, never leaves it RUNNING.
func TestDeadSupervisorFails(t *testing.T) {
	e := newEnv(t)
	j := e.submit("exec sleep 300", "")
	running := e.supervised(j.ID)
	e.close()
	if err := syscall.Kill(running.SupervisorPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.open()
	failed := e.waitFor(j.ID, store.Failed)
	if !strings.Contains(failed.Message, "supervisor") {
		t.Errorf("message %q does not say the supervisor died", failed.Message)
	}
}

func TestShellJoin(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"plain":        {args: []string{"python3", "train.py", "--epochs=3"}, want: "python3 train.py --epochs=3"},
		"spaces":       {args: []string{"sh", "-c", "echo hi"}, want: "sh -c 'echo hi'"},
		"single quote": {args: []string{"echo", "it's"}, want: `echo 'it'\''s'`},
		"empty":        {args: []string{"echo", ""}, want: "echo ''"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := shell.Join(tc.args); got != tc.want {
				t.Errorf("shell.Join(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}
