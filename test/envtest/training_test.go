package envtest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/testkube"
	"github.com/trainyard/trainyard/internal/workload"
)

// The "done when": `trainyard install`, then `trainyard operator`, then
// `trainyard submit --kube` runs a TrainJob of two workers doing real DDP training on
// Fashion-MNIST, from pods whose worker containers run as local processes with the pod's
// own command and environment (see podRunner). Rank 1's Python is killed after the first
// checkpoint: worker 0's launcher restarts the gang in place as attempt 2, on the same
// pods (no Job for attempt 2), from the checkpoint. Then worker 1's whole pod is killed:
// the operator restarts the whole gang as attempt 3, on new pods, which resumes from the
// latest checkpoint; status, events, `get` and `logs` say so.
func TestTrainingOnKubernetes(t *testing.T) {
	python := torchPython(t)
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	kube := []string{"--kube", "--kubeconfig", env.Kubeconfig}
	if out, err := trainyard(t, "install", "--kubeconfig", env.Kubeconfig); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	startOperator(t, env.Kubeconfig)
	runner := startPodRunner(t, env.Client, "default", binary)

	storage := t.TempDir()
	script := filepath.Join(testkube.RepoRoot(t), "examples", "fashion-mnist", "train.py")
	jobFile := filepath.Join(t.TempDir(), "job.yaml")
	spec := `apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata:
  name: fmnist
spec:
  workers: 2
  maxRestarts: 2
  command: [` + python + `, ` + script + `]
  args: [--epochs, "4", --train-subset, "3000", --test-subset, "1000"]
  storagePath: ` + storage + `
  kubernetes:
    image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
`
	if err := os.WriteFile(jobFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := trainyard(t, append([]string{"submit"}, append(kube, "-f", jobFile)...)...); err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}

	job := waitJob(t, env.Client, "fmnist", 2*time.Minute, func(j *v1.TrainJob) bool { return j.Status.RunDir != "" })
	waitPath(t, filepath.Join(job.Status.RunDir, "checkpoint_000001"), 3*time.Minute)
	pods := podUIDs(t, env.Client, "fmnist")
	if runner.killRank("fmnist-a1-1", syscall.SIGKILL) == 0 {
		t.Fatal("rank 1 of attempt 1 was not running")
	}
	job = waitJob(t, env.Client, "fmnist", 2*time.Minute, func(j *v1.TrainJob) bool {
		return j.Status.Attempt == 2 && j.Status.Phase == v1.PhaseRunning
	})
	if st := job.Status; st.PodsAttempt != 1 || st.Restarts != 1 {
		t.Errorf("status after a restart in place: podsAttempt %d, restarts %d", st.PodsAttempt, st.Restarts)
	}
	if after := podUIDs(t, env.Client, "fmnist"); after != pods {
		t.Errorf("pods after the restart in place: %s; want the same as before: %s", after, pods)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "fmnist-a2"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service fmnist-a2: %v; want none (the gang restarted in place)", err)
	}
	waitPath(t, filepath.Join(job.Status.RunDir, "checkpoint_000002"), 3*time.Minute)
	if !runner.kill("fmnist-a1-1", syscall.SIGKILL) {
		t.Fatal("worker 1 of attempt 1 was not running")
	}
	live := watchLive(t, env.Client, "fmnist")
	job = waitJob(t, env.Client, "fmnist", 4*time.Minute, func(j *v1.TrainJob) bool { return j.Status.Phase.Finished() })
	st := job.Status
	if st.Phase != v1.PhaseSucceeded || st.Attempt != 3 || st.Restarts != 2 || st.PodsAttempt != 0 {
		t.Fatalf("status: phase %s attempt %d restarts %d pods of attempt %d: %s", st.Phase, st.Attempt, st.Restarts, st.PodsAttempt, st.Reason)
	}
	if st.Iteration != 4 || st.LatestCheckpoint != "checkpoint_000004" || st.LastMetrics["accuracy"] == "" {
		t.Errorf("progress in status: iteration %d, checkpoint %q, metrics %v", st.Iteration, st.LatestCheckpoint, st.LastMetrics)
	}

	if seen := live(); seen == nil {
		t.Error("the status never showed attempt 3's progress while it ran (worker 0's progress endpoint)")
	} else {
		t.Logf("while attempt 3 ran: iteration %d, checkpoint %s, metrics %v", seen.Iteration, seen.LatestCheckpoint, seen.LastMetrics)
	}
	out, err := trainyard(t, append([]string{"get"}, append(kube, "fmnist")...)...)
	if err != nil || !strings.Contains(out, "Succeeded") || !strings.Contains(out, "WorkerFailed") {
		t.Errorf("get: %v\n%s", err, out)
	}
	out, err = trainyard(t, append([]string{"logs"}, append(kube, "fmnist")...)...)
	if err != nil || !strings.Contains(out, "resuming from checkpoint_000002") || !strings.Contains(out, "epoch 4/4") {
		t.Errorf("logs of the last attempt (from the run folder): %v\n%s", err, out)
	}
	reasons := eventReasons(t, env.Client, "fmnist")
	for _, want := range []string{"AttemptCreated", "Running", "RestartedInPlace", "WorkerFailed", "Restarting", "Succeeded"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no %s event; got %s", want, reasons)
		}
	}
}

// watchLive polls the TrainJob's status until the test ends and returns a function that
// says what it showed of attempt 3's progress while that attempt was running, if anything.
func watchLive(t *testing.T, c client.Client, name string) func() *v1.TrainJobStatus {
	var (
		mu   sync.Mutex
		seen *v1.TrainJobStatus
	)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			var j v1.TrainJob
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &j); err == nil {
				st := j.Status
				if st.Attempt == 3 && st.Phase == v1.PhaseRunning && st.Iteration >= 3 && st.LatestCheckpoint != "" {
					mu.Lock()
					seen = &st
					mu.Unlock()
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() *v1.TrainJobStatus {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// podUIDs lists the UIDs of a TrainJob's pods, sorted.
func podUIDs(t *testing.T, c client.Client, name string) string {
	t.Helper()
	var l corev1.PodList
	if err := c.List(context.Background(), &l, client.InNamespace("default"), client.MatchingLabels{workload.LabelJob: name}); err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, p := range l.Items {
		uids = append(uids, p.Name+"="+string(p.UID))
	}
	slices.Sort(uids)
	return strings.Join(uids, ",")
}

// torchPython returns the Python with torch, or skips.
func torchPython(t *testing.T) string {
	python := os.Getenv("TRAINYARD_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("PyTorch is not installed for %s (%v): `make test` installs python3-torch", python, err)
	}
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist"); err != nil {
		t.Skip("no Fashion-MNIST: `make test` installs dataset-fashion-mnist")
	}
	return python
}

// trainyard runs the binary and returns its output.
func trainyard(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

// startOperator runs `trainyard operator` against the control plane until the test ends.
func startOperator(t *testing.T, kubeconfig string) *lockedBuffer {
	t.Helper()
	var log lockedBuffer
	cmd := exec.Command(binary, "operator", "--kubeconfig", kubeconfig, "--image", "ghcr.io/trainyard/trainyard:test",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--progress-interval", "1s")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("operator log:\n%s", log.String())
		}
	})
	return &log
}

func waitJob(t *testing.T, c client.Client, name string, timeout time.Duration, ok func(*v1.TrainJob) bool) *v1.TrainJob {
	t.Helper()
	var j v1.TrainJob
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &j); err == nil && ok(&j) {
			return &j
		}
	}
	t.Fatalf("timed out waiting for TrainJob %s; status %+v", name, j.Status)
	return nil
}

func waitPath(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", path)
}

func eventReasons(t *testing.T, c client.Client, name string) string {
	t.Helper()
	var l eventsv1.EventList
	if err := c.List(context.Background(), &l, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return strings.Join(out, ",")
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
