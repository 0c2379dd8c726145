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

// readmitScript commits a checkpoint in attempt 1 and waits to be stopped; in attempt 2
// (the gang without worker 2) it commits one every half second; attempt 3 (grown back)
// says where it resumes and ends.
const readmitScript = `
import os, sys, time, trainyard
ctx = trainyard.get_context()
resume = trainyard.get_checkpoint()
print("rank %d of %d attempt %d resumes %s" % (ctx.rank, ctx.world_size, ctx.attempt,
      os.path.basename(resume) if resume else "none"), flush=True)
if ctx.attempt >= 3:
    sys.exit(0)
for step in range(240):
    folder = trainyard.new_checkpoint_dir() if ctx.rank == 0 else None
    trainyard.report({"step": step}, checkpoint=folder)
    time.sleep(60 if ctx.attempt == 1 else 0.5)
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
	job := torchJob(t, readmitScript, v1.EnvVar{Name: "SPARE_TAG", Value: tag})
	three, two, interval := int32(3), int32(2), int64(120)
	job.Spec.Workers, job.Spec.MinWorkers, job.Spec.ResizeIntervalSeconds = &three, &two, &interval
	secret := []byte("s3cret")
	gangAddr, progress, master := freeAddr(t), freeAddr(t), freeAddr(t)
	_, masterPort, _ := net.SplitHostPort(master)
	port, _ := strconv.Atoi(masterPort)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu   sync.Mutex
		res  [3]outcome
		wg   sync.WaitGroup
		stop [3]context.CancelFunc
	)
	start := func(i int) {
		wctx, wcancel := context.WithCancel(ctx)
		stop[i] = wcancel
		wg.Go(func() {
			out := &syncBuffer{}
			cfg := Config{Job: job, Attempt: 1, Worker: i, MasterAddr: "127.0.0.1", MasterPort: port, GangAddr: gangAddr,
				ProgressAddr: "127.0.0.1:0", GangSecret: secret}
			if i == 0 {
				cfg.ProgressAddr = progress
			}
			sum, err := Run(wctx, cfg, Options{Out: out})
			mu.Lock()
			res[i] = outcome{sum: sum, err: err, out: out}
			mu.Unlock()
		})
	}
	for i := range 3 {
		start(i)
	}
	dir := runDir(job)
	logOf := func(attempt, rank int) string {
		return filepath.Join(dir, "logs", fmt.Sprintf("attempt-%d", attempt), fmt.Sprintf("rank-%d.log", rank))
	}
	for rank := range 3 {
		waitForLog(t, logOf(1, rank), fmt.Sprintf("rank %d of 3", rank))
	}
	waitFor(t, "a spare on each worker", func() bool { return len(spares(t, tag)) == 3 })
	stop[2]() // worker 2's node is lost
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
	mu.Lock()
	res[2] = outcome{}
	mu.Unlock()

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
	start(2) // its new pod
	for rank := range 3 {
		waitForLog(t, logOf(3, rank), fmt.Sprintf("rank %d of 3 attempt 3 resumes checkpoint_", rank))
	}
	wg.Wait()
	for i := range 3 {
		if r := res[i]; r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 3 {
			t.Errorf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
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

// growScript commits a checkpoint every half second in attempt 1; attempt 2 says where it
// resumes and ends.
const growScript = `
import os, sys, time, trainyard
ctx = trainyard.get_context()
resume = trainyard.get_checkpoint()
print("rank %d of %d attempt %d resumes %s" % (ctx.rank, ctx.world_size, ctx.attempt,
      os.path.basename(resume) if resume else "none"), flush=True)
if ctx.attempt >= 2:
    sys.exit(0)
for step in range(240):
    folder = trainyard.new_checkpoint_dir() if ctx.rank == 0 else None
    trainyard.report({"step": step}, checkpoint=folder)
    time.sleep(0.5)
`

// A gang resized on new pods starts with its top workers dropped (the operator's
// TRAINYARD_DROPPED_WORKERS): workers 0 and 1 run attempt 1 as a gang of 2 without waiting
// for worker 2, and once worker 2 is readmitted and its pod connects, the gang grows to 3
// in place at its next checkpoint.
func TestGrowFromAPodSetStartedSmaller(t *testing.T) {
	tag := filepath.Base(t.TempDir())
	job := torchJob(t, growScript, v1.EnvVar{Name: "SPARE_TAG", Value: tag})
	three, two, interval := int32(3), int32(2), int64(120)
	job.Spec.Workers, job.Spec.MinWorkers, job.Spec.ResizeIntervalSeconds = &three, &two, &interval
	secret := []byte("s3cret")
	gangAddr, progress, master := freeAddr(t), freeAddr(t), freeAddr(t)
	_, masterPort, _ := net.SplitHostPort(master)
	port, _ := strconv.Atoi(masterPort)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		res [3]outcome
		wg  sync.WaitGroup
	)
	start := func(i int, dropped []int) {
		wg.Go(func() {
			out := &syncBuffer{}
			cfg := Config{Job: job, Attempt: 1, Worker: i, MasterAddr: "127.0.0.1", MasterPort: port, GangAddr: gangAddr,
				ProgressAddr: "127.0.0.1:0", GangSecret: secret, Dropped: dropped}
			if i == 0 {
				cfg.ProgressAddr = progress
			}
			sum, err := Run(ctx, cfg, Options{Out: out})
			mu.Lock()
			res[i] = outcome{sum: sum, err: err, out: out}
			mu.Unlock()
		})
	}
	start(0, []int{2})
	start(1, []int{2})
	dir := runDir(job)
	logOf := func(attempt, rank int) string {
		return filepath.Join(dir, "logs", fmt.Sprintf("attempt-%d", attempt), fmt.Sprintf("rank-%d.log", rank))
	}
	for rank := range 2 {
		waitForLog(t, logOf(1, rank), fmt.Sprintf("rank %d of 2 attempt 1", rank))
	}
	readmit := workload.DropRequest{Workers: []int{2}, Reason: "room found", Attempt: 1, Expires: time.Now().Add(workload.DropTTL)}
	if code, rep := postReadmit(t, progress, secret, readmit); code != http.StatusOK || rep.Workers != 2 || len(rep.Dropped) != 0 {
		t.Fatalf("the readmit: %d %+v", code, rep)
	}
	start(2, nil) // its pod, made after the readmit: nothing dropped
	for rank := range 3 {
		waitForLog(t, logOf(2, rank), fmt.Sprintf("rank %d of 3 attempt 2 resumes checkpoint_", rank))
	}
	wg.Wait()
	for i := range 3 {
		if r := res[i]; r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 2 {
			t.Errorf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
	if s := res[0].sum; s.Restarts != 0 || s.Resized != "resized from 2 to 3 workers: worker 2 readmitted (room found)" {
		t.Errorf("worker 0's summary: %+v; want no restart, and the grow", s)
	}
}
