package podworker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// elasticScript commits a checkpoint every half second, but in attempt SLOW_ATTEMPT,
// where it commits one and waits to be stopped; attempt LAST_ATTEMPT says where it
// resumes and ends.
const elasticScript = `
import os, sys, time, trainyard
ctx = trainyard.get_context()
resume = trainyard.get_checkpoint()
print("rank %d of %d attempt %d resumes %s" % (ctx.rank, ctx.world_size, ctx.attempt,
      os.path.basename(resume) if resume else "none"), flush=True)
if ctx.attempt >= int(os.environ["LAST_ATTEMPT"]):
    sys.exit(0)
for step in range(240):
    folder = trainyard.new_checkpoint_dir() if ctx.rank == 0 else None
    trainyard.report({"step": step}, checkpoint=folder)
    time.sleep(60 if ctx.attempt == int(os.environ["SLOW_ATTEMPT"]) else 0.5)
`

// An elastic 3-worker gang that went on without worker 2 grows back in place: the
// operator's signed readmit request makes worker 0's coordinator take worker 2 back, its
// new pod connects while attempt 2 runs on workers 0 and 1, and at the next checkpoint
// the gang stops and starts attempt 3 with all three (workers 0 and 1 on their spares,
// worker 2 on the Python it started while it waited), resuming from that checkpoint and
// using no restart. Requests signed with another
// secret, or as a drop, or naming worker 0, change nothing.
func TestReadmitDroppedWorker(t *testing.T) {
	tag := filepath.Base(t.TempDir())
	g := newElasticGang(t, tag, 1, 3) // attempt 1 waits for the loss; 3 is the grown gang's
	progress, secret, logOf := g.progress, g.secret, g.logOf
	for i := range 3 {
		g.start(i, nil)
	}
	for rank := range 3 {
		waitForLog(t, logOf(1, rank), fmt.Sprintf("rank %d of 3", rank))
	}
	waitFor(t, "a spare on each worker", func() bool { return len(spares(t, tag)) == 3 })
	g.stop[2]() // worker 2's node is lost
	waitFor(t, "worker 0 waits for worker 2", func() bool {
		s := getProgress(progress)
		return s.Attempt == 2 && s.Outcome == workload.OutcomeRestarting
	})
	drop := workload.DropRequest{Workers: []int{2}, Reason: "node c lost", Attempt: 1, Expires: time.Now().Add(workload.DropTTL)}
	if code, rep := postDrop(t, progress, secret, drop); code != http.StatusOK || rep.Workers != 2 {
		t.Fatalf("the drop: %d %+v", code, rep)
	}
	for rank := range 2 {
		waitForLog(t, logOf(2, rank), fmt.Sprintf("rank %d of 2 attempt 2", rank))
	}
	g.mu.Lock()
	g.res[2] = outcome{}
	g.mu.Unlock()

	readmit := workload.DropRequest{Workers: []int{2}, Reason: "room found", Attempt: 2, Expires: time.Now().Add(workload.DropTTL)}
	for _, bad := range []struct {
		name string
		code int
		rep  workload.DropReply
		want string
	}{
		{"another secret", 0, workload.DropReply{}, "does not verify"},
		{"signed as a drop", 0, workload.DropReply{}, "does not verify"},
		{"worker 0", 0, workload.DropReply{}, "give workers 1 to 2"},
	} {
		switch bad.name {
		case "another secret":
			bad.code, bad.rep = postReadmit(t, progress, []byte("guess"), readmit)
		case "signed as a drop":
			bad.code, bad.rep = postGang(t, progress, workload.ReadmitPath, workload.SignDrop, secret, readmit)
		case "worker 0":
			bad.code, bad.rep = postReadmit(t, progress, secret, withWorkers(readmit, 0))
		}
		if bad.code/100 != 4 || !strings.Contains(bad.rep.Error, bad.want) {
			t.Errorf("%s: %d %+v; want a refusal saying %q", bad.name, bad.code, bad.rep, bad.want)
		}
	}
	if s := getProgress(progress); s.Attempt != 2 || len(s.Dropped) != 1 {
		t.Fatalf("progress after the refused requests: %+v; want attempt 2 without worker 2", s)
	}
	if code, rep := postReadmit(t, progress, secret, readmit); code != http.StatusOK || rep.Workers != 2 || len(rep.Dropped) != 0 || rep.Attempt != 2 {
		t.Fatalf("the readmit: %d %+v; want 200, 2 workers running until the grow, none dropped", code, rep)
	}
	g.start(2, nil) // its new pod
	for rank := range 3 {
		waitForLog(t, logOf(3, rank), fmt.Sprintf("rank %d of 3 attempt 3 resumes checkpoint_", rank))
	}
	g.wait(3)
	res := &g.res
	if s := res[0].sum; s.Restarts != 1 || len(s.Dropped) != 0 || s.Resized != "resized from 2 to 3 workers: worker 2 readmitted (room found)" {
		t.Errorf("worker 0's summary: %+v; want the loss's restart only, and the grow", s)
	}
	if log := readFile(t, logOf(3, 0)); strings.Contains(log, "resumes checkpoint_000001") {
		t.Errorf("attempt 3 resumes from attempt 1's checkpoint, not from one attempt 2 committed:\n%s", log)
	}
	for _, want := range []string{"worker 2 readmitted (room found): once connected, the gang grows from 2 to 3 workers at its next checkpoint",
		"attempt 2 stopped; the gang grows in place as attempt 3 with 3 workers (a resize uses no restart)"} {
		if !strings.Contains(res[0].out.String(), want) {
			t.Errorf("worker 0's console lacks %q:\n%s", want, res[0].out)
		}
	}
	if want := "attempt 3: 1 of 1 rank(s) run on prestarted Pythons"; !strings.Contains(res[1].out.String(), want) {
		t.Errorf("worker 1's console lacks %q:\n%s", want, res[1].out)
	}
	// Worker 2's new pod waited to join: its rank's Python imported torch meanwhile.
	for _, want := range []string{"worker 2 waits for its gang: 1 Python(s) import torch meanwhile",
		"attempt 3: 1 of 1 rank(s) run on prestarted Pythons"} {
		if !strings.Contains(res[2].out.String(), want) {
			t.Errorf("worker 2's console lacks %q:\n%s", want, res[2].out)
		}
	}
}

// A gang resized on new pods starts with its top workers dropped (the operator's
// TRAINYARD_DROPPED_WORKERS): workers 0 and 1 run attempt 1 as a gang of 2 without waiting
// for worker 2, and once worker 2 is readmitted and its pod connects, the gang grows to 3
// in place at its next checkpoint.
func TestGrowFromAPodSetStartedSmaller(t *testing.T) {
	g := newElasticGang(t, filepath.Base(t.TempDir()), 0, 2)
	progress, secret, logOf := g.progress, g.secret, g.logOf
	g.start(0, []int{2})
	g.start(1, []int{2})
	for rank := range 2 {
		waitForLog(t, logOf(1, rank), fmt.Sprintf("rank %d of 2 attempt 1", rank))
	}
	readmit := workload.DropRequest{Workers: []int{2}, Reason: "room found", Attempt: 1, Expires: time.Now().Add(workload.DropTTL)}
	if code, rep := postReadmit(t, progress, secret, readmit); code != http.StatusOK || rep.Workers != 2 || len(rep.Dropped) != 0 {
		t.Fatalf("the readmit: %d %+v", code, rep)
	}
	g.start(2, nil) // its pod, made after the readmit: nothing dropped
	for rank := range 3 {
		waitForLog(t, logOf(2, rank), fmt.Sprintf("rank %d of 3 attempt 2 resumes checkpoint_", rank))
	}
	g.wait(2)
	if s := g.res[0].sum; s.Restarts != 0 || s.Resized != "resized from 2 to 3 workers: worker 2 readmitted (room found)" {
		t.Errorf("worker 0's summary: %+v; want no restart, and the grow", s)
	}
}

// elasticGang runs the workers of a 2:3 gang of real torch processes (Debian's) in this
// process, as the pods of one pod set, with a gang secret and worker 0's progress port.
type elasticGang struct {
	t                  *testing.T
	ctx                context.Context
	job                *v1.TrainJob
	secret             []byte
	gangAddr, progress string
	port               int
	mu                 sync.Mutex
	res                [3]outcome
	wg                 sync.WaitGroup
	stop               [3]context.CancelFunc
}

// newElasticGang is a gang of elasticScript with those attempts (tag marks its spares).
func newElasticGang(t *testing.T, tag string, slowAttempt, lastAttempt int) *elasticGang {
	job := torchJob(t, elasticScript, v1.EnvVar{Name: "SPARE_TAG", Value: tag},
		v1.EnvVar{Name: "SLOW_ATTEMPT", Value: strconv.Itoa(slowAttempt)}, v1.EnvVar{Name: "LAST_ATTEMPT", Value: strconv.Itoa(lastAttempt)})
	three, two, interval := int32(3), int32(2), int64(120)
	job.Spec.Workers, job.Spec.MinWorkers, job.Spec.ResizeIntervalSeconds = &three, &two, &interval
	g := &elasticGang{t: t, job: job, secret: []byte("s3cret"), gangAddr: freeAddr(t), progress: freeAddr(t)}
	_, masterPort, _ := net.SplitHostPort(freeAddr(t))
	g.port, _ = strconv.Atoi(masterPort)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	g.ctx = ctx
	return g
}

// start runs worker i's pod, which the operator made with dropped dropped.
func (g *elasticGang) start(i int, dropped []int) {
	wctx, wcancel := context.WithCancel(g.ctx)
	g.stop[i] = wcancel
	g.wg.Go(func() {
		out := &syncBuffer{}
		cfg := Config{Job: g.job, Attempt: 1, Worker: i, MasterAddr: "127.0.0.1", MasterPort: g.port, GangAddr: g.gangAddr,
			ProgressAddr: "127.0.0.1:0", GangSecret: g.secret, Dropped: dropped}
		if i == 0 {
			cfg.ProgressAddr = g.progress
		}
		sum, err := Run(wctx, cfg, Options{Out: out})
		g.mu.Lock()
		g.res[i] = outcome{sum: sum, err: err, out: out}
		g.mu.Unlock()
	})
}

// logOf is rank's log of attempt.
func (g *elasticGang) logOf(attempt, rank int) string {
	return filepath.Join(runDir(g.job), "logs", fmt.Sprintf("attempt-%d", attempt), fmt.Sprintf("rank-%d.log", rank))
}

// wait waits for every worker, and checks that each succeeded in attempt.
func (g *elasticGang) wait(attempt int) {
	g.wg.Wait()
	for i := range 3 {
		if r := g.res[i]; r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != attempt {
			g.t.Errorf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
}
