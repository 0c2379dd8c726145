package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/workload"
)

// podJob is the TrainJob as the operator passes it to `trainyard worker`: two workers
// training the example on a small subset, in a storage path the "pods" share.
func podJob(t *testing.T, storage, run string, epochs int, extra ...string) string {
	t.Helper()
	workers, pgTimeout, cpu := int32(2), int64(60), resource.MustParse("1")
	args := append([]string{filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py"),
		"--epochs", strconv.Itoa(epochs), "--train-subset", "2000", "--test-subset", "500"}, extra...)
	job := v1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: "ml"},
		Spec: v1.TrainJobSpec{Workers: &workers, Command: []string{python}, Args: args, StoragePath: storage,
			RunName: run, ProcessGroupTimeoutSeconds: &pgTimeout,
			// One thread per rank, as the pods would have on their own CPUs: here they share two.
			Resources: v1.WorkerResources{CPU: &cpu}},
	}
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// pod is one simulated worker pod: a `trainyard worker` process and its termination log.
type pod struct {
	*trainyard
	summary string
}

// startPods starts the two workers of an attempt side by side, as the Job controller
// starts the pods of an Indexed Job, with worker 0's rendezvous, gang coordinator and
// progress on free loopback ports.
func startPods(t *testing.T, job string, attempt int) [2]pod {
	t.Helper()
	port, gang := freePort(t), freePort(t)
	var pods [2]pod
	for i := range pods {
		pods[i].summary = filepath.Join(t.TempDir(), "termination-log")
		env := []string{workload.EnvJob + "=" + job, fmt.Sprintf("%s=%d", workload.EnvAttempt, attempt),
			fmt.Sprintf("%s=%d", workload.EnvWorker, i), workload.EnvMasterAddr + "=127.0.0.1",
			fmt.Sprintf("%s=%d", workload.EnvMasterPort, port), "TRAINYARD_TERMINATION_LOG=" + pods[i].summary,
			fmt.Sprintf("%s=127.0.0.1:%d", workload.EnvGangAddr, gang), fmt.Sprintf("%s=127.0.0.1:%d", workload.EnvProgressAddr, freePort(t))}
		pods[i].trainyard = start(t, repoRoot(t), env, "worker")
	}
	return pods
}

// readSummary reads the summary the worker left.
func (p pod) readSummary(t *testing.T) workload.Summary {
	t.Helper()
	data, err := os.ReadFile(p.summary)
	if err != nil {
		t.Fatalf("termination log: %v\n%s", err, p.out)
	}
	s, err := workload.DecodeSummary(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two `trainyard worker` processes, as the two pods of an attempt, train the example with
// DDP over gloo: both succeed, the run folder holds both ranks' logs and worker 0's
// results, and worker 0's summary has the run's progress.
func TestWorkerPodsTrain(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	job := podJob(t, storage, "pods-0f1e2d3c", 2)
	pods := startPods(t, job, 1)
	for i, p := range pods {
		if code := p.wait(t); code != 0 {
			t.Fatalf("worker %d: exit %d\n%s", i, code, p.out)
		}
	}
	dir := filepath.Join(storage, "pods-0f1e2d3c")
	out0 := pods[0].out.String()
	if acc := accuracies(out0); len(acc) != 2 || !strings.Contains(out0, "[rank 0 pid ") || !strings.Contains(out0, "world_size=2 backend=gloo") {
		t.Errorf("worker 0's console: want rank 0's prefixed lines, 2 ranks over gloo and 2 epochs (got %v):\n%s", acc, out0)
	}
	for rank := range 2 {
		log := filepath.Join(dir, "logs", "attempt-1", fmt.Sprintf("rank-%d.log", rank))
		if _, err := os.Stat(log); err != nil {
			t.Errorf("rank %d's log: %v", rank, err)
		}
	}
	if rows, err := reporting.ReadResults(dir); err != nil || len(rows) != 2 {
		t.Errorf("results: %d rows, %v; want 2 epochs", len(rows), err)
	}
	if _, err := os.Stat(filepath.Join(dir, reporting.ProgressFile)); err != nil {
		t.Error(err)
	}
	s := pods[0].readSummary(t)
	if s.Worker != 0 || s.Outcome != "succeeded" || s.Iteration != 2 || s.Checkpoint != "checkpoint_000002" ||
		s.RunDir != dir || s.Metrics["epoch"] != "2" || s.Metrics["accuracy"] == "" {
		t.Errorf("worker 0's summary: %+v", s)
	}
	if s := pods[1].readSummary(t); s.Worker != 1 || s.Outcome != "succeeded" || s.Iteration != 0 {
		t.Errorf("worker 1's summary: %+v", s)
	}
	if rec := readRecord(t, dir); rec.Phase != "Succeeded" || len(rec.Attempts) != 1 {
		t.Errorf("run.json: phase %s, %d attempts", rec.Phase, len(rec.Attempts))
	}
}

// The kubelet stops worker 1's pod (SIGTERM) after the first checkpoint: worker 1's rank
// hears the preemption notice, the gang's ranks agree to save, and once worker 0 committed
// that checkpoint (seen in the shared run folder) worker 1 stops its rank and says it was
// interrupted; worker 0's coordinator stops its rank and waits
// for worker 1 to come back, until the operator deletes its pod too (SIGTERM). The next
// attempt's two workers (new pods) both resume from worker 0's latest checkpoint and
// finish.
func TestWorkerPodsResume(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	dir := filepath.Join(storage, "resume")
	job := podJob(t, storage, "resume", 3, "--sleep-per-step", "0.02")
	first := startPods(t, job, 1)
	waitForFile(t, filepath.Join(dir, "checkpoint_000001"), 2*time.Minute, first[0].out)
	if err := first[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first[1].wait(t); code != 130 {
		t.Errorf("worker 1 stopped by SIGTERM: exit %d, want 130\n%s", code, first[1].out)
	}
	if !strings.Contains(first[1].out.String(), "committed after the preemption notice; stopping the gang") {
		t.Errorf("worker 1 did not stop once worker 0 committed the checkpoint saved at its notice:\n%s", first[1].out)
	}
	first[0].out.waitFor(t, "attempt 1 failed: worker 1", time.Minute)
	if err := first[0].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first[0].wait(t); code != 130 {
		t.Errorf("worker 0 stopped by SIGTERM while it waits for worker 1: exit %d, want 130\n%s", code, first[0].out)
	}
	if s := first[1].readSummary(t); s.Outcome != "interrupted" {
		t.Errorf("worker 1's summary: %+v, want interrupted", s)
	}
	s0 := first[0].readSummary(t)
	if s0.Outcome != "interrupted" || s0.Checkpoint == "" {
		t.Fatalf("worker 0's summary: %+v, want interrupted, with a checkpoint", s0)
	}

	second := startPods(t, job, 2)
	for i, p := range second {
		if code := p.wait(t); code != 0 {
			t.Fatalf("attempt 2, worker %d: exit %d\n%s", i, code, p.out)
		}
		if want := "attempt 2: resuming from " + s0.Checkpoint; !strings.Contains(p.out.String(), want) {
			t.Errorf("attempt 2, worker %d's console lacks %q:\n%s", i, want, p.out)
		}
	}
	out := second[0].out.String()
	// The checkpoint may be one saved at the preemption notice (worker 1's SIGTERM), in
	// the middle of an epoch: "epoch 2 at step 40", or an epoch's: "epoch 2 done".
	for _, want := range []string{"resuming from " + s0.Checkpoint + ": epoch ", "epoch 3/3"} {
		if !strings.Contains(out, want) {
			t.Errorf("attempt 2, worker 0's console lacks %q:\n%s", want, out)
		}
	}
	if s := second[0].readSummary(t); s.Outcome != "succeeded" || s.Metrics["epoch"] != "3" {
		t.Errorf("attempt 2, worker 0's summary: %+v", s)
	}
}
