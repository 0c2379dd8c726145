package podworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/trainyard/trainyard/internal/gang"
	"github.com/trainyard/trainyard/internal/workload"
)

// dropScript says where each rank runs. In attempt 1 rank 0 commits a checkpoint and
// every rank waits to be stopped; later attempts resume from it and end.
const dropScript = `
import os, sys, time, trainyard
ctx = trainyard.get_context()
resume = trainyard.get_checkpoint()
folder = trainyard.new_checkpoint_dir() if ctx.rank == 0 else None
res = trainyard.report({"loss": 1.0}, checkpoint=folder)
print("rank %d of %d attempt %d node %s previous world %s resumes %s" % (ctx.rank, ctx.world_size, ctx.attempt,
      os.environ["NODE_RANK"], os.environ.get("TRAINYARD_PREVIOUS_WORLD_SIZE", "-"),
      os.path.basename(resume) if resume else "none"), flush=True)
if ctx.attempt == 1:
    time.sleep(60)
`

// A worker of an elastic 3-worker gang is lost for good: the operator's signed drop
// request makes worker 0's coordinator go on with workers 0 and 2, on the same
// processes' pods, as nodes 0 and 1 of 2: their ranks are 0 and 1 of 2, they see the world
// size before, and they resume from attempt 1's checkpoint; worker 2's renumbered rank
// runs on the spare its launcher kept (Debian's torch). Unsigned, forged and
// impossible requests change nothing; the lost worker's pod is refused when it comes back.
func TestDropLostWorker(t *testing.T) {
	tag := filepath.Base(t.TempDir())
	job := torchJob(t, dropScript, v1.EnvVar{Name: "SPARE_TAG", Value: tag})
	three, two := int32(3), int32(2)
	job.Spec.Workers, job.Spec.MinWorkers = &three, &two
	secret := []byte("s3cret")
	gangAddr, progress, master := freeAddr(t), freeAddr(t), freeAddr(t)
	_, masterPort, _ := net.SplitHostPort(master)
	port, _ := strconv.Atoi(masterPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		res  [4]outcome // workers 0 to 2, then worker 1's late pod
		wg   sync.WaitGroup
		stop [3]context.CancelFunc
	)
	// startIn starts worker i, whose outcome goes to res[slot]: the lost worker's first pod
	// may end after its late one.
	startIn := func(i, slot int) {
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
			res[slot] = outcome{sum: sum, err: err, out: out}
		})
	}
	start := func(i int) { startIn(i, i) }
	for i := range 3 {
		start(i)
	}
	dir := runDir(job)
	for rank := range 3 {
		waitForLog(t, filepath.Join(dir, "logs", "attempt-1", fmt.Sprintf("rank-%d.log", rank)), "rank "+strconv.Itoa(rank)+" of 3")
	}
	// Every worker started its spare (once a rank spoke): worker 1's loss could otherwise end
	// attempt 1 before worker 2's, and attempt 2 would start afresh there.
	waitFor(t, "a spare on each worker", func() bool { return len(spares(t, tag)) == 3 })
	stop[1]() // worker 1's pod stops, and its node is gone
	waitFor(t, "worker 0 waits for worker 1", func() bool {
		s := getProgress(progress)
		return s.Attempt == 2 && s.Outcome == workload.OutcomeRestarting
	})
	req := workload.DropRequest{Workers: []int{1}, Reason: "node b lost", Attempt: 1, Expires: time.Now().Add(workload.DropTTL)}
	for _, bad := range []struct {
		name   string
		secret []byte
		req    workload.DropRequest
		code   int
		want   string
	}{
		{"another secret", []byte("guess"), req, http.StatusForbidden, "does not verify"},
		{"worker 0", secret, withWorkers(req, 0), http.StatusBadRequest, "give workers 1 to 2"},
		{"a connected worker", secret, withWorkers(req, 2), http.StatusConflict, "worker 2 (pod"},
		{"expired", secret, expired(req), http.StatusBadRequest, "expired"},
		{"expiring in an hour", secret, expiresIn(req, time.Hour), http.StatusBadRequest, "too far ahead"},
		{"over 16 KiB", secret, withReason(req, strings.Repeat("x", workload.DropMaxBody)), http.StatusBadRequest, "request body too large"},
	} {
		code, rep := postDrop(t, progress, bad.secret, bad.req)
		if code != bad.code || !strings.Contains(rep.Error, bad.want) || len(rep.Dropped) != 0 {
			t.Errorf("%s: %d %+v; want %d saying %q, nothing dropped", bad.name, code, rep, bad.code, bad.want)
		}
	}
	if code, rep := postDrop(t, progress, secret, req); code != http.StatusOK || rep.Workers != 2 || len(rep.Dropped) != 1 || rep.Dropped[0] != 1 || rep.Attempt != 2 {
		t.Fatalf("the drop: %d %+v", code, rep)
	}
	startIn(1, 3) // the lost worker's pod comes back too late
	wg.Wait()
	for _, i := range []int{0, 2} {
		if r := res[i]; r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 2 {
			t.Errorf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
	var refused *gang.RefusedError
	if err := res[3].err; !errors.As(err, &refused) || !strings.Contains(err.Error(), "worker 1 was dropped from the gang") {
		t.Errorf("worker 1's late pod: %v; want a refusal\n%s", err, res[3].out)
	}
	if s := res[0].sum; len(s.Dropped) != 1 || s.Resized != "resized from 3 to 2 workers: worker 1 dropped (node b lost)" {
		t.Errorf("worker 0's summary: %+v", s)
	}
	for rank, want := range []string{
		"rank 0 of 2 attempt 2 node 0 previous world 3 resumes checkpoint_000001",
		"rank 1 of 2 attempt 2 node 1 previous world 3 resumes checkpoint_000001",
	} {
		if log := readFile(t, filepath.Join(dir, "logs", "attempt-2", fmt.Sprintf("rank-%d.log", rank))); !strings.Contains(log, want) {
			t.Errorf("rank %d's log of attempt 2 lacks %q:\n%s", rank, want, log)
		}
	}
	for _, want := range []string{"attempt 2: the gang runs with 2 of its 3 workers; worker 2 runs as node 1, ranks 1 to 1",
		"attempt 2: 1 of 1 rank(s) run on prestarted Pythons"} {
		if !strings.Contains(res[2].out.String(), want) {
			t.Errorf("worker 2's console lacks %q:\n%s", want, res[2].out)
		}
	}
	if want := "the gang goes on without worker 1 (node b lost)"; !strings.Contains(res[0].out.String(), want) {
		t.Errorf("worker 0's console lacks %q:\n%s", want, res[0].out)
	}
}

func withWorkers(r workload.DropRequest, w ...int) workload.DropRequest {
	r.Workers = w
	return r
}

func expired(r workload.DropRequest) workload.DropRequest {
	return expiresIn(r, -time.Second)
}

func expiresIn(r workload.DropRequest, d time.Duration) workload.DropRequest {
	r.Expires = time.Now().Add(d)
	return r
}

func withReason(r workload.DropRequest, reason string) workload.DropRequest {
	r.Reason = reason
	return r
}

// postDrop signs r with secret and POSTs it to worker 0's progress address.
func postDrop(t *testing.T, addr string, secret []byte, r workload.DropRequest) (int, workload.DropReply) {
	t.Helper()
	return postGang(t, addr, workload.DropPath, workload.SignDrop, secret, r)
}

// postReadmit signs r with secret as a readmit request and POSTs it to worker 0.
func postReadmit(t *testing.T, addr string, secret []byte, r workload.DropRequest) (int, workload.DropReply) {
	t.Helper()
	return postGang(t, addr, workload.ReadmitPath, workload.SignReadmit, secret, r)
}

// postGang signs r with sign and secret and POSTs it to path at worker 0's progress
// address.
func postGang(t *testing.T, addr, path string, sign func([]byte, workload.DropRequest) ([]byte, string, error),
	secret []byte, r workload.DropRequest) (int, workload.DropReply) {
	t.Helper()
	body, mac, err := sign(secret, r)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(workload.DropMACHeader, mac)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep workload.DropReply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("the reply to a request at %s: %v", path, err)
	}
	return resp.StatusCode, rep
}

// getProgress reads worker 0's progress, or the zero Summary.
func getProgress(addr string) workload.Summary {
	var s workload.Summary
	resp, err := http.Get("http://" + addr + workload.ProgressPath)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s
}

// waitFor polls ok for up to 30 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out: %s", what)
}
