package podworker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
)

// preemptScript reports once, then waits for the preemption notice; rank 0 then saves a
// checkpoint saying so and every rank reports again, and goes on "training" until it is
// stopped.
const preemptScript = `
import os, time, trainyard
ctx = trainyard.get_context()
trainyard.report({"step": 1})
print("rank %d reported" % ctx.rank, flush=True)
while trainyard.preemption() is None:
    time.sleep(0.02)
folder = None
if ctx.rank == 0:
    folder = trainyard.new_checkpoint_dir()
    with open(os.path.join(folder, "state"), "w") as f:
        f.write("saved at the notice: " + trainyard.preemption_info().reason)
trainyard.report({"step": 2}, checkpoint=folder)
print("rank %d saved" % ctx.rank, flush=True)
time.sleep(60)
`

// Both pods of a gang get SIGTERM (a Kueue preemption, a drain): the ranks hear the
// preemption notice, rank 0's checkpoint is committed, then the gang stops: every worker
// ends interrupted, with no restart in place, and run.json counts the preemption.
func TestPreemptedPods(t *testing.T) {
	job := pythonJob(t, preemptScript)
	job.Spec.MaxRestarts = 2
	grace := int64(60) // the notice's deadline: 50 s after it, far from the commit's time even on a loaded machine
	job.Spec.TerminationGracePeriodSeconds = &grace
	gang := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		res  [2]outcome
		wg   sync.WaitGroup
		sigs [2]chan string
	)
	for i := range res {
		sigs[i] = make(chan string, 1)
		wg.Go(func() {
			out := &syncBuffer{}
			cfg := Config{Job: job, Attempt: 1, Worker: i, MasterAddr: "127.0.0.1", MasterPort: 29500, GangAddr: gang,
				ProgressAddr: "127.0.0.1:0"}
			sum, err := Run(ctx, cfg, Options{Out: out, Preempt: sigs[i]})
			res[i] = outcome{sum: sum, err: err, out: out}
		})
	}
	dir := runDir(job)
	for rank := range 2 {
		waitForLog(t, filepath.Join(dir, "logs", "attempt-1", fmt.Sprintf("rank-%d.log", rank)), "reported")
	}
	notice := time.Now()
	for i := range sigs {
		sigs[i] <- "SIGTERM"
	}
	wg.Wait()
	if took := time.Since(notice); took > 40*time.Second {
		t.Errorf("the gang took %s to stop: it waited for the deadline, not the commit", took)
	}
	for i, r := range res {
		if r.sum.Outcome != "interrupted" {
			t.Errorf("worker %d: %v, summary %+v; want interrupted\n%s", i, r.err, r.sum, r.out)
		}
	}
	// Both pods got SIGTERM: the first worker whose launcher sees the commit stops its ranks
	// and leaves, and the coordinator may stop the other's attempt before its launcher sees
	// the commit too. One of them says so.
	const committed = "checkpoint_000001 committed after the preemption notice"
	if !strings.Contains(res[0].out.String(), committed) && !strings.Contains(res[1].out.String(), committed) {
		t.Errorf("no worker's console says %q:\nworker 0:\n%s\nworker 1:\n%s", committed, res[0].out, res[1].out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "checkpoint_000001", "state"))
	if err != nil || string(data) != "saved at the notice: SIGTERM" {
		t.Errorf("checkpoint_000001: %q %v", data, err)
	}
	rec, err := rundir.ReadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != v1.PhaseInterrupted || rec.Preemptions != 1 || len(rec.Attempts) != 1 {
		t.Errorf("run.json: phase %s, %d preemptions, %d attempts; want Interrupted, 1, 1", rec.Phase, rec.Preemptions, len(rec.Attempts))
	}
}

// waitForLog waits until the file at path holds text.
func waitForLog(t *testing.T, path, text string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), text) {
			return
		}
	}
	t.Fatalf("%s never held %q", path, text)
}

// The pod's stop signal ends the worker however it meets an attempt: during one that reads
// it (the ranks get the notice), between attempts, and during one that ends for another
// reason before its launcher reads it (the coordinator stopped the attempt because another
// worker left: the worker must not wait for an attempt that may never start; e2e
// TestWorkerPodsResume met this in CI).
func TestPreemptionEndsTheWorker(t *testing.T) {
	for _, tc := range []struct {
		name string
		// during runs while the attempt runs, with the signal channel; it says whether
		// the attempt was preempted.
		during  func(t *testing.T, p *preemption, signal chan<- string) bool
		between bool // the signal comes after the attempt
	}{
		{name: "read by the attempt", during: func(t *testing.T, p *preemption, signal chan<- string) bool {
			signal <- "pod stopping"
			return <-p.relay != ""
		}},
		{name: "between attempts", between: true, during: func(*testing.T, *preemption, chan<- string) bool { return false }},
		{name: "while the attempt ends for another reason", during: func(t *testing.T, p *preemption, signal chan<- string) bool {
			signal <- "pod stopping"
			for !p.signalled.Load() {
				time.Sleep(time.Millisecond)
			}
			return false // the launcher had stopped reading its Preempt
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			p := newPreemption(stop)
			signal := make(chan string, 1)
			followed := make(chan struct{})
			go func() {
				defer close(followed)
				p.follow(ctx, signal)
			}()
			p.attempt(func() bool { return tc.during(t, p, signal) })
			if tc.between {
				signal <- "pod stopping"
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the stop signal did not end the worker")
			}
			<-followed
		})
	}
}
