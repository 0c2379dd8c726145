package podworker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/workload"
)

// inPlaceScript reports once (rank 0 with a checkpoint). In attempt 1, rank 1 waits for
// that checkpoint and exits 3, while rank 0 takes a second to obey SIGTERM.
const inPlaceScript = `
import os, signal, sys, time, trainyard
ctx = trainyard.get_context()
resume = trainyard.get_checkpoint()
folder = trainyard.new_checkpoint_dir()
with open(os.path.join(folder, "state"), "w") as f:
    f.write("attempt %d" % ctx.attempt)
res = trainyard.report({"loss": 0.25 * ctx.attempt}, checkpoint=folder if ctx.rank == 0 else None)
print("rank %d attempt %d resumes %s iteration %d" % (ctx.rank, ctx.attempt,
      os.path.basename(resume) if resume else "none", res.iteration), flush=True)
if ctx.attempt == 1:
    if ctx.rank == 1:
        while not os.path.exists(os.path.join(os.environ["TRAINYARD_RUN_DIR"], "checkpoint_000001")):
            time.sleep(0.02)
        sys.exit(3)
    def slow_stop(*_):
        time.sleep(1)
        sys.exit(143)
    signal.signal(signal.SIGTERM, slow_stop)
    time.sleep(60)
`

// runGangWith runs workers 0 and 1 side by side, each with cfg changed by change, and
// polls worker 0's progress while they run.
func runGangWith(t *testing.T, job *v1.TrainJob, change func(*Config)) ([2]outcome, []workload.Summary) {
	t.Helper()
	gang, progress, master := freeAddr(t), freeAddr(t), freeAddr(t)
	_, masterPort, _ := net.SplitHostPort(master)
	port, _ := strconv.Atoi(masterPort)
	var (
		res  [2]outcome
		wg   sync.WaitGroup
		seen []workload.Summary
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range res {
		wg.Go(func() {
			out := &syncBuffer{}
			cfg := Config{Job: job, Attempt: 1, Worker: i, MasterAddr: "127.0.0.1", MasterPort: port, GangAddr: gang,
				ProgressAddr: "127.0.0.1:0"}
			if i == 0 {
				cfg.ProgressAddr = progress
			}
			if change != nil {
				change(&cfg)
			}
			sum, err := Run(ctx, cfg, Options{Out: out})
			res[i] = outcome{sum: sum, err: err, out: out}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return res, seen
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := http.Get("http://" + progress + workload.ProgressPath)
		if err != nil {
			continue
		}
		var s workload.Summary
		if json.NewDecoder(resp.Body).Decode(&s) == nil && (len(seen) == 0 || seen[len(seen)-1].Outcome != s.Outcome ||
			seen[len(seen)-1].Attempt != s.Attempt) {
			seen = append(seen, s)
		}
		resp.Body.Close()
	}
}

// A rank that fails makes the gang stop and start again in place: the same workers run
// attempt 2, which resumes from the checkpoint of attempt 1; worker 0's progress says the
// gang is restarting, then which attempt runs and why it restarted.
func TestRestartInPlace(t *testing.T) {
	job := pythonJob(t, inPlaceScript)
	job.Spec.MaxRestarts = 1
	res, seen := runGangWith(t, job, nil)
	for i, r := range res {
		if r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 2 || r.sum.Restarts != 1 {
			t.Fatalf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
	s0 := res[0].sum
	lastRestart := regexp.MustCompile(`^attempt 2 restarted in place after rank 1 \(worker 1, pid \d+\) exited with code 3$`)
	if s0.InPlace != 1 || !lastRestart.MatchString(s0.LastRestart) || s0.Checkpoint != "checkpoint_000002" || s0.Reason != "the rank of worker 0 exited 0 in attempt 2" {
		t.Errorf("worker 0's summary %+v", s0)
	}
	dir := runDir(job)
	for rank := range 2 {
		log := readFile(t, filepath.Join(dir, "logs", "attempt-2", "rank-"+string(rune('0'+rank))+".log"))
		if want := "attempt 2 resumes checkpoint_000001 iteration 2"; !strings.Contains(log, want) {
			t.Errorf("rank %d's log of attempt 2 lacks %q:\n%s", rank, want, log)
		}
	}
	rec, err := rundir.ReadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != v1.PhaseSucceeded || len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != "interrupted" ||
		len(rec.Attempts[0].Ranks) != 1 || !rec.Attempts[0].Ranks[0].StoppedByTrainyard {
		t.Errorf("run.json: %+v; want attempt 1 with worker 0's rank stopped, then attempt 2", rec)
	}
	var outcomes []string
	for _, s := range seen {
		outcomes = append(outcomes, s.Outcome+"@"+string(rune('0'+s.Attempt)))
	}
	if got := strings.Join(outcomes, " "); !strings.Contains(got, "running@1 restarting@") || !strings.Contains(got, "running@2") {
		t.Errorf("worker 0's progress went %q; want running in attempt 1, restarting, running in attempt 2", got)
	}
	for _, want := range []string{"attempt 1 failed: rank 1 (worker 1, pid", "restarting the gang in place as attempt 2 (restart 1 of 1)"} {
		if !strings.Contains(res[0].out.String(), want) {
			t.Errorf("worker 0's console lacks %q:\n%s", want, res[0].out)
		}
	}
	if want := "attempt 2: resuming from checkpoint_000001"; !strings.Contains(res[1].out.String(), want) {
		t.Errorf("worker 1's console lacks %q:\n%s", want, res[1].out)
	}
}

// spareScript says whether torch was imported before it ran. In attempt 1, rank 1 waits
// until the spares of both workers' ranks (Pythons running the launcher's spare code with
// this job's SPARE_TAG) exist, then fails; rank 0 waits to be stopped.
const spareScript = `
import glob, os, sys, time
attempt, rank = int(os.environ["TRAINYARD_ATTEMPT"]), int(os.environ["RANK"])
print("rank %d attempt %d torch imported %s" % (rank, attempt, "torch" in sys.modules), flush=True)
if attempt == 1:
    if rank == 1:
        tag = ("SPARE_TAG=" + os.environ["SPARE_TAG"]).encode()
        for _ in range(600):
            spares = 0
            for d in glob.glob("/proc/[0-9]*"):
                try:
                    with open(d + "/cmdline", "rb") as c, open(d + "/environ", "rb") as e:
                        spares += b"a spare Python" in c.read() and tag in e.read().split(b"\0")
                except OSError:
                    pass
            if spares >= 2:
                break
            time.sleep(0.05)
        sys.exit(3)
    time.sleep(60)
`

// A restart in place runs every worker's ranks on the spares their launchers started
// during the attempt, which imported torch: the failed rank's worker and the one whose
// rank the coordinator stopped alike. No spare outlives the gang.
func TestRestartInPlaceOnSpares(t *testing.T) {
	job := torchJob(t, spareScript, v1.EnvVar{Name: "SPARE_TAG", Value: filepath.Base(t.TempDir())})
	res, _ := runGangWith(t, job, nil)
	for i, r := range res {
		if r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 2 {
			t.Fatalf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
		if want := "attempt 2: 1 of 1 rank(s) run on prestarted Pythons"; !strings.Contains(r.out.String(), want) {
			t.Errorf("worker %d's console lacks %q:\n%s", i, want, r.out)
		}
	}
	dir := runDir(job)
	for rank := range 2 {
		log := readFile(t, filepath.Join(dir, "logs", "attempt-2", fmt.Sprintf("rank-%d.log", rank)))
		if want := fmt.Sprintf("rank %d attempt 2 torch imported True", rank); !strings.Contains(log, want) {
			t.Errorf("rank %d's log of attempt 2 lacks %q:\n%s", rank, want, log)
		}
	}
	if left := spares(t, job.Spec.Env[len(job.Spec.Env)-1].Value); len(left) > 0 {
		t.Errorf("spares left after the gang finished: %v", left)
	}
}

// torchJob is pythonJob with Debian's Python, which has torch (the test is skipped
// without it), and one restart.
func torchJob(t *testing.T, script string, env ...v1.EnvVar) *v1.TrainJob {
	t.Helper()
	const torchPython = "/usr/bin/python3" // Debian's, with python3-torch
	if exec.Command(torchPython, "-c", "import torch.distributed").Run() != nil {
		t.Skip(torchPython + " cannot import torch (apt install python3-torch)")
	}
	job := pythonJob(t, script, env...)
	job.Spec.Command[0] = torchPython
	job.Spec.MaxRestarts = 1
	return job
}

// spares lists the live processes that run the launcher's spare code with SPARE_TAG=tag.
func spares(t *testing.T, tag string) []string {
	t.Helper()
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		env, _ := os.ReadFile(filepath.Join(d, "environ"))
		stat, _ := os.ReadFile(filepath.Join(d, "stat"))
		if strings.Contains(string(cmd), "a spare Python") && slices.Contains(strings.Split(string(env), "\x00"), "SPARE_TAG="+tag) &&
			!strings.Contains(string(stat), ") Z ") {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}

// storeScript connects to the gang's store as torch's own client, says whether it is an
// agent's store and what attempt 1's counter is, and counts itself in attempt 1, where
// rank 1 then fails (once rank 0 has counted itself: before, a slow rank 0 could be
// stopped before it printed).
const storeScript = `
import os, sys, time, trainyard
from datetime import timedelta
import torch.distributed as dist
ctx = trainyard.get_context()
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                      timeout=timedelta(seconds=20))
print("rank %d attempt %d agent store %s, attempt 1's count %d" % (ctx.rank, ctx.attempt,
      os.environ["TORCHELASTIC_USE_AGENT_STORE"], store.add("attempt-1", 0)), flush=True)
if ctx.attempt == 1:
    store.add("attempt-1", 1)
    if ctx.rank == 0:
        store.set("rank-0-counted", "1")
    if ctx.rank == 1:
        store.wait(["rank-0-counted"])  # fail once rank 0 has printed and counted itself
        sys.exit(3)
    time.sleep(60)
`

// Worker 0 hosts the gang's store before the first attempt, every rank (rank 0 too) is its
// client, and a restart in place finds it emptied.
func TestWorkerZeroHostsTheStore(t *testing.T) {
	job := torchJob(t, storeScript)
	res, _ := runGangWith(t, job, nil)
	for i, r := range res {
		if r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 2 {
			t.Fatalf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
	if !strings.Contains(res[0].out.String(), "(hosted by worker 0's trainyard)") {
		t.Errorf("worker 0's console does not say who hosts the store:\n%s", res[0].out)
	}
	dir := runDir(job)
	for rank := range 2 {
		log := readFile(t, filepath.Join(dir, "logs", "attempt-1", fmt.Sprintf("rank-%d.log", rank)))
		if !regexp.MustCompile(`attempt 1 agent store True, attempt 1's count [01]`).MatchString(log) {
			t.Errorf("rank %d of attempt 1 was not a client of worker 0's store:\n%s", rank, log)
		}
		log = readFile(t, filepath.Join(dir, "logs", "attempt-2", fmt.Sprintf("rank-%d.log", rank)))
		if want := "attempt 2 agent store True, attempt 1's count 0"; !strings.Contains(log, want) {
			t.Errorf("rank %d of attempt 2: want %q (the store emptied between attempts):\n%s", rank, want, log)
		}
	}
}

// blockedScript has rank 0 of attempt 1 wait in a store call for a key that never comes,
// with a SIGTERM handler (which Python runs only once that call returns), while rank 1
// fails once rank 0 waits.
const blockedScript = `
import os, signal, sys, time, trainyard
from datetime import timedelta
import torch.distributed as dist
ctx = trainyard.get_context()
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                      timeout=timedelta(seconds=60))
if ctx.attempt == 1:
    if ctx.rank == 1:
        store.wait(["rank 0 waits"])
        time.sleep(0.5)
        sys.exit(3)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    store.set("rank 0 waits", "1")
    print("blocked at %.3f" % time.time(), flush=True)
    store.get("never set")
`

// A rank blocked in a call to worker 0's store (where its SIGTERM handler cannot run) ends
// as soon as the gang stops, not at the grace period's SIGKILL: the coordinator closes the
// store's connections as the stop begins.
func TestStopClosesTheStore(t *testing.T) {
	job := torchJob(t, blockedScript)
	grace := int64(30)
	job.Spec.TerminationGracePeriodSeconds = &grace
	res, _ := runGangWith(t, job, nil)
	for i, r := range res {
		if r.err != nil || r.sum.Outcome != "succeeded" || r.sum.Attempt != 2 {
			t.Fatalf("worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
	}
	dir := runDir(job)
	log := readFile(t, filepath.Join(dir, "logs", "attempt-1", "rank-0.log"))
	m := regexp.MustCompile(`blocked at (\d+\.\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("rank 0 of attempt 1 did not wait in the store:\n%s", log)
	}
	sec, _ := strconv.ParseFloat(m[1], 64)
	blocked := time.Unix(0, int64(sec*1e9))
	rec, err := rundir.ReadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	rank0 := rec.Attempts[0].Ranks[0]
	if rank0.Ended == nil {
		t.Fatalf("rank 0 of attempt 1 has no end: %+v", rank0)
	}
	if took := rank0.Ended.Sub(blocked); took > 10*time.Second || rank0.Signal == "SIGKILL" {
		t.Errorf("rank 0 of attempt 1 ended %s after it blocked in the store (signal %q), want well within the grace period (%ds):\n%s",
			took.Round(time.Millisecond), rank0.Signal, grace, log)
	}
}

// The restarts the operator counted before it made the pods count against maxRestarts:
// with them used up, a failure ends the gang for good.
func TestRestartsCountFromTheOperator(t *testing.T) {
	job := shellJob(t, `if [ "$RANK" = 1 ]; then exit 3; fi`)
	job.Spec.MaxRestarts = 1
	res, _ := runGangWith(t, job, func(c *Config) { c.Attempt, c.Restarts = 2, 1 })
	for i, r := range res {
		if r.err != nil || r.sum.Outcome != "failed" || r.sum.Final != "WorkerFailed" || r.sum.Attempt != 2 || r.sum.Restarts != 1 ||
			!strings.HasSuffix(r.sum.Reason, "exited with code 3 in attempt 2; no restarts left (maxRestarts 1)") {
			t.Errorf("worker %d: %v, summary %+v", i, r.err, r.sum)
		}
	}
}

// The gang's variables: its coordinator's address (MASTER_ADDR's port 29502 by default),
// its secret, and the restarts the operator counted; bad ones are named.
func TestParseEnvGang(t *testing.T) {
	env := podEnv(t, operatorJob(t))
	cfg, err := ParseEnv(lookup(env))
	if err != nil || cfg.gangAddr() != "mnist-a2-0.mnist-a2:29502" || cfg.GangSecret != nil || cfg.Restarts != 0 || cfg.Disruptions != 0 {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
	env[workload.EnvGangAddr], env[workload.EnvGangSecret] = "127.0.0.1:4000", "s3cret"
	env[workload.EnvRestarts], env[workload.EnvDisruptions], env[workload.EnvDroppedWorkers] = "3", "1", "1"
	cfg, err = ParseEnv(lookup(env))
	if err != nil || cfg.gangAddr() != "127.0.0.1:4000" || string(cfg.GangSecret) != "s3cret" || cfg.Restarts != 3 || cfg.Disruptions != 1 ||
		len(cfg.Dropped) != 1 || cfg.Dropped[0] != 1 {
		t.Errorf("set: %+v, %v", cfg, err)
	}
	env[workload.EnvGangAddr], env[workload.EnvRestarts], env[workload.EnvDisruptions] = "nowhere", "-1", "x"
	env[workload.EnvDroppedWorkers] = "0,1"
	_, err = ParseEnv(lookup(env))
	for _, want := range []string{"TRAINYARD_GANG_ADDR: must be host:port", `TRAINYARD_RESTARTS: must be a whole number from 0 to 1073741824, got "-1"`,
		`TRAINYARD_DISRUPTIONS: must be a whole number from 0 to 1073741824, got "x"`,
		`TRAINYARD_DROPPED_WORKERS: "0,1": give worker indexes from 1 to 1, separated by commas`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestPreviousWorkers(t *testing.T) {
	rec := rundir.Record{Attempts: []rundir.Attempt{{Number: 1, Workers: 4}, {Number: 2, Workers: 4}, {Number: 3, Workers: 2}}}
	for n, want := range map[int]int{1: 0, 2: 4, 3: 4, 4: 2, 9: 2} {
		if got := previousWorkers(rec, n); got != want {
			t.Errorf("previousWorkers before attempt %d = %d; want %d", n, got, want)
		}
	}
	if got := previousWorkers(rundir.Record{Attempts: []rundir.Attempt{{Number: 1}}}, 2); got != 0 {
		t.Errorf("a record without workers: %d; want 0", got)
	}
}
