package podworker

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/workload"
)

// reportScript reports once through the helper, rank 0 with a checkpoint, and prints what
// it resumed from and where its checkpoint folder was made. It exits 3 in the attempt that
// FAIL_IN_ATTEMPT names (the other ranks once rank 0's checkpoint is there: the gang stops
// every rank when one fails).
const reportScript = `
import os, sys, time, trainyard
ctx = trainyard.get_context()
resume = trainyard.get_checkpoint()
folder = trainyard.new_checkpoint_dir()
with open(os.path.join(folder, "state"), "w") as f:
    f.write("rank %d attempt %d" % (ctx.rank, ctx.attempt))
res = trainyard.report({"loss": 0.25 * ctx.attempt}, checkpoint=folder if ctx.rank == 0 else None)
print("rank %d attempt %d resumes %s iteration %d scratch %s" % (ctx.rank, ctx.attempt,
      os.path.basename(resume) if resume else "none", res.iteration, os.path.dirname(folder)))
if os.environ.get("FAIL_IN_ATTEMPT") == str(ctx.attempt):
    mine = os.path.join(os.environ["TRAINYARD_RUN_DIR"], "checkpoint_%06d" % res.iteration)
    while ctx.rank != 0 and not os.path.exists(mine):
        time.sleep(0.02)
    sys.exit(3)
`

// syncBuffer is a bytes.Buffer safe for the console's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pythonJob returns a defaulted job of two workers that runs script with python3, its
// storage path in a temporary folder.
func pythonJob(t *testing.T, script string, env ...v1.EnvVar) *v1.TrainJob {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH for the in-job helper")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return defaulted(t, v1.TrainJobSpec{Command: []string{py, "report.py"}, WorkingDir: dir, Env: env})
}

// shellJob returns a defaulted job of two workers that runs a shell script.
func shellJob(t *testing.T, script string) *v1.TrainJob {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "worker.sh"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return defaulted(t, v1.TrainJobSpec{Command: []string{filepath.Join(dir, "worker.sh")}, WorkingDir: dir})
}

func defaulted(t *testing.T, spec v1.TrainJobSpec) *v1.TrainJob {
	t.Helper()
	workers := int32(2)
	spec.Workers, spec.RunName = &workers, "mnist-0f1e2d3c"
	spec.StoragePath = filepath.Join(t.TempDir(), "results")
	job := &v1.TrainJob{Spec: spec}
	if err := jobspec.Default(job, jobspec.Env{}); err != nil {
		t.Fatal(err)
	}
	if err := jobspec.Validate(job); err != nil {
		t.Fatal(err)
	}
	return job
}

// outcome is how one worker ended.
type outcome struct {
	sum workload.Summary
	err error
	out *syncBuffer
}

// runWorker runs one worker of an attempt with a generous timeout, its gang coordinated
// on gangAddr.
func runWorker(ctx context.Context, job *v1.TrainJob, attempt, index int, gangAddr string, opts Options) outcome {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out := &syncBuffer{}
	opts.Out = out
	cfg := Config{Job: job, Attempt: attempt, Worker: index, MasterAddr: "127.0.0.1", MasterPort: 29500, GangAddr: gangAddr}
	sum, err := Run(ctx, cfg, opts)
	return outcome{sum: sum, err: err, out: out}
}

// runGang runs workers 0 and 1 of an attempt side by side, as two pods.
func runGang(t *testing.T, job *v1.TrainJob, attempt int) [2]outcome {
	t.Helper()
	var (
		res [2]outcome
		wg  sync.WaitGroup
	)
	addr := freeAddr(t)
	for i := range res {
		wg.Go(func() { res[i] = runWorker(context.Background(), job, attempt, i, addr, Options{}) })
	}
	wg.Wait()
	return res
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func runDir(job *v1.TrainJob) string { return filepath.Join(job.Spec.StoragePath, job.Spec.RunName) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Two workers of one attempt share the run folder: worker 0 keeps the record, the results
// and the checkpoints, worker 1 only its rank's log; both leave a summary.
func TestGangSharesRunFolder(t *testing.T) {
	job := pythonJob(t, reportScript)
	res := runGang(t, job, 1)
	dir := runDir(job)
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("worker %d: %v\n%s", i, r.err, r.out)
		}
	}
	want := [2]workload.Summary{
		{Worker: 0, Outcome: "succeeded", Reason: "the rank of worker 0 exited 0 in attempt 1", Iteration: 1,
			Metrics: map[string]string{"loss": "0.25"}, Checkpoint: "checkpoint_000001", RunDir: dir, Attempt: 1},
		{Worker: 1, Outcome: "succeeded", Reason: "the rank of worker 1 exited 0 in attempt 1", Attempt: 1},
	}
	for i := range res {
		if diff := cmp.Diff(want[i], res[i].sum); diff != "" {
			t.Errorf("worker %d summary (-want +got):\n%s", i, diff)
		}
	}
	rank0 := readFile(t, filepath.Join(dir, "logs", "attempt-1", "rank-0.log"))
	rank1 := readFile(t, filepath.Join(dir, "logs", "attempt-1", "rank-1.log"))
	if want := "rank 0 attempt 1 resumes none iteration 1 scratch " + filepath.Join(dir, reporting.ScratchDir, "rank-0"); !strings.Contains(rank0, want) {
		t.Errorf("rank 0's log lacks %q:\n%s", want, rank0)
	}
	if !strings.Contains(rank1, "rank 1 attempt 1 resumes none iteration 1 scratch ") || strings.Contains(rank1, dir) {
		t.Errorf("rank 1's log: want iteration 1 and a scratch folder outside the run folder:\n%s", rank1)
	}
	if !strings.Contains(res[1].out.String(), "[rank 1 pid") {
		t.Errorf("worker 1's console lacks its rank's prefixed line:\n%s", res[1].out)
	}
	rec, err := rundir.ReadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != v1.PhaseSucceeded || len(rec.Attempts) != 1 || len(rec.Attempts[0].Ranks) != 1 || rec.Attempts[0].Ranks[0].Rank != 0 {
		t.Errorf("run.json: %+v; want succeeded, one attempt with worker 0's rank only", rec)
	}
	rows, err := reporting.ReadResults(dir)
	if err != nil || len(rows) != 1 {
		t.Errorf("results: %d rows (%v), want rank 0's one report", len(rows), err)
	}
	if events, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*")); len(events) != 1 {
		t.Errorf("TensorBoard event files %v, want worker 0's one", events)
	}

	// The operator never runs a succeeded run again, but a worker 0 that finds one says so.
	again := runWorker(context.Background(), job, 2, 0, freeAddr(t), Options{})
	var input *InputError
	if !errors.As(again.err, &input) || !strings.Contains(again.err.Error(), "already succeeded") ||
		again.sum.Outcome != "failed" || again.sum.Reason != again.err.Error() {
		t.Errorf("worker 0 of a succeeded run: %v, summary %+v; want an InputError saying it succeeded", again.err, again.sum)
	}
}

// A failed attempt with no restarts left leaves checkpoint 1 and a gang that failed for
// good; the next attempt's workers (new pods) both resume from it.
func TestNextAttemptResumes(t *testing.T) {
	job := pythonJob(t, reportScript, v1.EnvVar{Name: "FAIL_IN_ATTEMPT", Value: "1"})
	first := runGang(t, job, 1)
	for i, r := range first {
		if r.err != nil || r.sum.Outcome != "failed" || r.sum.Final != "WorkerFailed" || r.sum.Attempt != 1 ||
			!strings.Contains(r.sum.Reason, "exited with code 3 in attempt 1; no restarts left (maxRestarts 0)") {
			t.Errorf("attempt 1, worker %d: %v, summary %+v; want the gang's failure, for good", i, r.err, r.sum)
		}
	}
	if first[0].sum.Reason != first[1].sum.Reason {
		t.Errorf("the workers give different reasons: %q and %q", first[0].sum.Reason, first[1].sum.Reason)
	}
	if first[0].sum.Checkpoint != "checkpoint_000001" {
		t.Errorf("attempt 1, worker 0's summary %+v: want checkpoint_000001", first[0].sum)
	}
	if rec, _ := rundir.ReadRecord(runDir(job)); rec.Phase != v1.PhaseFailed || rec.Finished == nil {
		t.Errorf("run.json after the gang failed for good: phase %s, finished %v; want Failed and finished", rec.Phase, rec.Finished)
	}

	second := runGang(t, job, 2)
	for i, r := range second {
		if r.err != nil || r.sum.Outcome != "succeeded" {
			t.Fatalf("attempt 2, worker %d: %v, summary %+v\n%s", i, r.err, r.sum, r.out)
		}
		log := readFile(t, filepath.Join(runDir(job), "logs", "attempt-2", "rank-"+string(rune('0'+i))+".log"))
		if want := "attempt 2 resumes checkpoint_000001 iteration 2"; !strings.Contains(log, want) {
			t.Errorf("rank %d's log lacks %q:\n%s", i, want, log)
		}
		if !strings.Contains(r.out.String(), "attempt 2: resuming from checkpoint_000001") {
			t.Errorf("worker %d's console lacks the resume notice:\n%s", i, r.out)
		}
	}
	if s := second[0].sum; s.Iteration != 2 || s.Checkpoint != "checkpoint_000002" || s.Metrics["loss"] != "0.5" {
		t.Errorf("attempt 2, worker 0's summary %+v: want iteration 2, checkpoint_000002, loss 0.5", s)
	}
}

// Worker 0 waits while the previous attempt's worker 0 holds the run folder, for a while.
func TestPrimaryWaitsForLock(t *testing.T) {
	job := shellJob(t, "echo hello")
	job.Spec.Workers = ptr(int32(1))
	previous, err := rundir.Open(job, rundir.Options{})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(time.Second, func() { previous.Close() })
	r := runWorker(context.Background(), job, 1, 0, freeAddr(t), Options{LockWait: 20 * time.Second})
	if r.err != nil || r.sum.Outcome != "succeeded" || !strings.Contains(r.out.String(), "is locked, probably by the previous attempt's worker 0") {
		t.Errorf("worker 0 after the lock was released: %v, %+v; want success after a notice:\n%s", r.err, r.sum, r.out)
	}

	held, err := rundir.Open(job, rundir.Options{Rerun: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r = runWorker(context.Background(), job, 2, 0, freeAddr(t), Options{LockWait: 700 * time.Millisecond})
	var input *InputError
	if r.err == nil || errors.As(r.err, &input) || !strings.Contains(r.err.Error(), "is still locked after 1s") || r.sum.Outcome != "failed" {
		t.Errorf("worker 0 with the lock held: %v, %+v; want a failure that restarts may cure", r.err, r.sum)
	}
}

// Another worker waits for worker 0's coordinator, for a while, and is interrupted at once.
func TestSecondaryWaitsForCoordinator(t *testing.T) {
	job := shellJob(t, "echo hello")
	addr := freeAddr(t)
	r := runWorker(context.Background(), job, 1, 1, addr, Options{PrimaryWait: 700 * time.Millisecond})
	if r.err == nil || !strings.Contains(r.err.Error(), "worker 0's coordinator at "+addr+" did not answer within 700ms") ||
		r.sum.Outcome != "failed" {
		t.Errorf("worker 1 without worker 0: %v, %+v", r.err, r.sum)
	}
	if _, err := os.Stat(runDir(job)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worker 1 without worker 0 made the run folder: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	r = runWorker(ctx, job, 1, 1, addr, Options{})
	if r.sum.Outcome != "interrupted" || time.Since(start) > 5*time.Second {
		t.Errorf("worker 1 stopped while waiting: %+v after %s; want interrupted at once", r.sum, time.Since(start))
	}
}

// A job with GPUs fails clearly in a pod that sees too few, and takes the first N of more.
func TestGPUs(t *testing.T) {
	job := shellJob(t, `echo "sees [$CUDA_VISIBLE_DEVICES]"`)
	job.Spec.Workers = ptr(int32(1))
	job.Spec.Resources.GPU = 1
	t.Setenv("PATH", t.TempDir()) // no nvidia-smi
	r := runWorker(context.Background(), job, 1, 0, freeAddr(t), Options{})
	var input *InputError
	if !errors.As(r.err, &input) || !strings.Contains(r.err.Error(), "asks for 1 GPU(s) per worker but this pod sees 0") {
		t.Errorf("no GPU: %v; want an InputError", r.err)
	}

	bin := t.TempDir()
	smi := `#!/bin/sh
cat <<'ROWS'
0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15
1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15
ROWS
`
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	r = runWorker(context.Background(), job, 1, 0, freeAddr(t), Options{})
	if r.err != nil || !strings.Contains(r.out.String(), "sees [0]") {
		t.Errorf("two GPUs: %v; want the first:\n%s", r.err, r.out)
	}
}

func TestWriteSummary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 9000)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := workload.Summary{Worker: 1, Outcome: "failed", Reason: "rank 1 (worker 1, pid 7) exited with code 3 in attempt 2"}
	if err := WriteSummary(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := workload.DecodeSummary(readFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("summary read back (-want +got):\n%s", diff)
	}
}

func TestCopyExecutable(t *testing.T) {
	src := filepath.Join(t.TempDir(), "trainyard")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho copied\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst, err := copyExecutable(src, filepath.Join(dir, "trainyard"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dst).Output()
	if err != nil || string(out) != "copied\n" {
		t.Errorf("running the copy: %q, %v", out, err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("copy's mode: %v (%v), want 0755", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want the copy alone", len(entries))
	}
	if _, err := CopySelf(filepath.Join(dir, "missing")); err == nil {
		t.Error("CopySelf into a folder that does not exist succeeded")
	}
}

// A copy longer than one flush (8 MiB) arrives whole, byte for byte.
func TestCopyFlushingCopiesAll(t *testing.T) {
	data := make([]byte, 2*flushEvery+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	src := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst, err := copyExecutable(src, filepath.Join(t.TempDir(), "trainyard"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the copy has %d bytes (%v), want the %d written, equal", len(got), err, len(data))
	}
}
