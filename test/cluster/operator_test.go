package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/internal/testcluster"
	"github.com/trainyard/trainyard/internal/workload"
)

// sharedDir is the host folder every worker pod mounts at /shared: the example's code and
// the runs' folders (the shared storage a real cluster gets from a PVC).
const sharedDir = "/tmp/trainyard-testcluster-shared"

// trainyardCmd runs the trainyard binary against the cluster and returns its exit code,
// stdout and stderr.
func trainyardCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	bin := os.Getenv("TRAINYARD_BIN")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.Kubeconfig())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errOut.String()
}

// installOperator installs the operator from the trainyard image as a pod, with the small
// requests per GPU that fit the node (testcluster.WorkerCPUPerGPU), and waits until it is
// ready; it is uninstalled when the test ends.
func installOperator(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	code, out, errOut := trainyardCmd(t, ctx, "install", "--image", testcluster.TrainyardImage,
		"--worker-cpu-per-gpu", testcluster.WorkerCPUPerGPU, "--worker-memory-per-gpu", testcluster.WorkerMemoryPerGPU,
		"--room-probe-image", testcluster.PauseImage)
	if code != 0 {
		t.Fatalf("trainyard install: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		if code, out, errOut := trainyardCmd(t, ctx, "uninstall", "--yes"); code != 0 {
			t.Logf("trainyard uninstall: exit %d\n%s%s", code, out, errOut)
		}
		// The next test installs again, which a namespace still being deleted refuses.
		waitFor(t, "the operator's namespace to go", 3*time.Minute, func() bool {
			_, err := cl.Client.CoreV1().Namespaces().Get(ctx, "trainyard-system", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		d, err := cl.Client.AppsV1().Deployments("trainyard-system").Get(ctx, "trainyard-operator", metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas >= 1 {
			return
		}
		if time.Now().After(deadline) {
			pods, _ := cl.Client.CoreV1().Pods("trainyard-system").List(ctx, metav1.ListOptions{})
			for _, p := range pods.Items {
				t.Logf("operator pod %s: %s", p.Name, podStatus(&p))
			}
			t.Fatalf("the operator's Deployment is not ready within 3 minutes: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// job is a TrainJob of the tests: 2 workers (or workers) running command (by default the Fashion-MNIST
// example from the shared folder, with args) in the worker image, the runs' folders on
// the shared folder.
type job struct {
	name    string
	workers int      // 2 when 0
	args    []string // the example's flags
	command []string // instead of the example
	spec    string   // more spec fields, YAML at the spec's indentation
	image   string   // instead of the worker image
	volumes string   // more volumes, a YAML flow list's items
	mounts  string   // more volume mounts, a YAML flow list's items
	kube    string   // more spec.kubernetes fields, YAML at their indentation
	labels  string   // the TrainJob's labels, a YAML flow map's items
	notes   string   // the TrainJob's annotations, a YAML flow map's items
}

// file writes the TrainJob and returns its path.
func (j job) file(t *testing.T) string {
	t.Helper()
	code := filepath.Join(sharedDir, "code")
	if err := os.MkdirAll(code, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "fashion-mnist", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "train.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	command := j.command
	if command == nil {
		command = append([]string{"python3", "/shared/code/train.py"}, j.args...)
	}
	commandJSON, _ := json.Marshal(command)
	image := j.image
	if image == "" {
		image = testcluster.WorkerImage
	}
	workers := j.workers
	if workers == 0 {
		workers = 2
	}
	volumes := "{name: shared, persistentVolumeClaim: {claimName: shared}}" // sharedClaim: sharedDir
	if j.volumes != "" {
		volumes += ", " + j.volumes
	}
	mounts := "{name: shared, mountPath: /shared}"
	if j.mounts != "" {
		mounts += ", " + j.mounts
	}
	text := fmt.Sprintf(`apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: %s, labels: {%s}, annotations: {%s}}
spec:
  workers: %d
  command: %s
  storagePath: /shared/results
%s
  kubernetes:
    image: %s
    imagePullPolicy: IfNotPresent
    volumes: [%s]
    volumeMounts: [%s]
%s
`, j.name, j.labels, j.notes, workers, commandJSON, j.spec, image, volumes, mounts, j.kube)
	path := filepath.Join(t.TempDir(), j.name+".yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// submit submits the job with trainyard submit --kube.
func (j job) submit(t *testing.T, ctx context.Context) {
	t.Helper()
	sharedClaim(t, ctx)
	if code, out, errOut := trainyardCmd(t, ctx, "submit", "--kube", "-f", j.file(t)); code != 0 {
		t.Fatalf("submit %s: exit %d\n%s%s", j.name, code, out, errOut)
	}
}

// trainJobStatus is the part of a TrainJob's status the tests read.
type trainJobStatus struct {
	Phase       string `json:"phase"`
	Reason      string `json:"reason"`
	Attempt     int    `json:"attempt"`
	Restarts    int    `json:"restarts"`
	Disruptions int    `json:"disruptions"`
	// Workers is the size Kueue admitted of an elastic gang (0: all of spec.workers).
	Workers int `json:"workers"`
	// DroppedWorkers are the workers an elastic gang went on without, in place.
	DroppedWorkers []int `json:"droppedWorkers"`
	// WorkerReplacements counts each worker's pods replaced alone.
	WorkerReplacements []int          `json:"workerReplacements"`
	Iteration          int            `json:"iteration"`
	LatestCheckpoint   string         `json:"latestCheckpoint"`
	LastMetrics        map[string]any `json:"lastMetrics"`
	Message            string         `json:"message"`
	Conditions         []struct {
		Type, Status, Reason, Message string
	} `json:"conditions"`
}

// hasReason says whether a condition of the status has the reason.
func (s trainJobStatus) hasReason(reasons ...string) bool {
	for _, c := range s.Conditions {
		for _, r := range reasons {
			if c.Reason == r {
				return true
			}
		}
	}
	return false
}

func getStatus(t *testing.T, ctx context.Context, name string) trainJobStatus {
	t.Helper()
	b, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs", name).DoRaw(ctx)
	if err != nil {
		t.Fatalf("get TrainJob %s: %v", name, err)
	}
	var tj struct {
		Status trainJobStatus `json:"status"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatal(err)
	}
	return tj.Status
}

// waitStatus polls the TrainJob until ok, failing the test after timeout with the last
// status and `trainyard get`'s view.
func waitStatus(t *testing.T, name string, timeout time.Duration, ok func(trainJobStatus) bool) trainJobStatus {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		s := getStatus(t, ctx, name)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			_, out, errOut := trainyardCmd(t, ctx, "get", "--kube", name)
			t.Fatalf("TrainJob %s: not as wanted within %s; status %+v\n%s%s%s", name, timeout, s, out, errOut, operatorState(ctx))
		}
		time.Sleep(time.Second)
	}
}

// operatorState says where the operator's pods are and how often their container
// restarted, with the end of the last container's log when it did, for a test's failure.
func operatorState(ctx context.Context) string {
	pods, err := cl.Client.CoreV1().Pods("trainyard-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("the operator's pods: %v\n", err)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		fmt.Fprintf(&b, "operator pod %s on %s: %s, %d restarts\n", p.Name, p.Spec.NodeName, p.Status.Phase, restarts)
		if restarts == 0 {
			continue
		}
		tail := int64(20)
		log, err := cl.Client.CoreV1().Pods("trainyard-system").GetLogs(p.Name, &corev1.PodLogOptions{Previous: true, TailLines: &tail}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "  its previous container's log: %v\n", err)
			continue
		}
		fmt.Fprintf(&b, "  the end of its previous container's log:\n%s\n", log)
	}
	return b.String()
}

// The operator runs as a pod with its ServiceAccount's rights, and a 2-worker
// Fashion-MNIST TrainJob trains to the end over DDP on real pods: MASTER_ADDR resolves
// through CoreDNS, logs -f streams both ranks through kubelet, and get shows the pods.
// A second job has a worker's Python killed inside its container after its first
// checkpoint: the whole gang restarts in place (the same pods) and resumes from that
// checkpoint on the shared folder.
func TestOperatorTrainsOnRealPods(t *testing.T) {
	cluster(t)
	_ = os.RemoveAll(sharedDir)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	t.Run("trains to the end", func(t *testing.T) {
		job{name: "mnist", args: []string{"--epochs", "2", "--train-subset", "6000", "--test-subset", "1000"}}.submit(t, ctx)
		code, logs, errOut := trainyardCmd(t, ctx, "logs", "--kube", "-f", "--all-ranks", "mnist")
		if code != 0 {
			t.Errorf("logs -f: exit %d: %s", code, errOut)
		}
		// The example prints from rank 0; worker 1's pod is in the log by its exit line.
		for _, want := range []string{"[rank 0", "epoch 2/2", "of worker 1 exited 0"} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs -f lack %q:\n%s", want, logs)
			}
		}
		s := waitStatus(t, "mnist", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Iteration != 2 || s.LatestCheckpoint == "" {
			t.Errorf("status %+v, want Succeeded at iteration 2 with a checkpoint", s)
		}
		_, out, _ := trainyardCmd(t, ctx, "get", "--kube", "mnist")
		for _, want := range []string{"Succeeded", "mnist-a1-", testcluster.NodeName} {
			if !strings.Contains(out, want) {
				t.Errorf("get lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("a killed worker restarts the gang in place from its checkpoint", func(t *testing.T) {
		job{name: "mnist-kill", spec: "  maxRestarts: 2",
			args: []string{"--epochs", "3", "--train-subset", "6000", "--test-subset", "1000", "--sleep-per-step", "0.05"}}.submit(t, ctx)
		waitStatus(t, "mnist-kill", 5*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })
		pod, pod0 := workerPod(t, ctx, "mnist-kill", 1), workerPod(t, ctx, "mnist-kill", 0)
		killPython(t, pod)
		s := waitStatus(t, "mnist-kill", 6*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Restarts != 1 || s.Attempt != 2 || s.Iteration != 3 {
			t.Errorf("status %+v, want Succeeded on attempt 2 after 1 restart, at iteration 3", s)
		}
		// The pod kept running: worker 0's launcher restarted the gang in place.
		if _, err := cl.Client.CoreV1().Services("default").Get(ctx, "mnist-kill-a2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Service mnist-kill-a2: %v; want none: the gang restarts in place on attempt 1's pods", err)
		}
		if p, err := cl.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s, whose Python was killed: %v; want it to have gone on to succeed", pod, err)
		}
		_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "mnist-kill")
		if !strings.Contains(logs, "resuming from checkpoint_") {
			t.Errorf("attempt 2 did not resume from a checkpoint:\n%s", logs)
		}
		// Both workers' ranks restarted on the spares their pods kept (torch imported):
		// worker 1's, whose rank failed, and worker 0's, which the gang stopped.
		for _, p := range []string{pod0, pod} {
			b, err := cl.Client.CoreV1().Pods("default").GetLogs(p, &corev1.PodLogOptions{}).DoRaw(ctx)
			if want := "attempt 2: 1 of 1 rank(s) run on prestarted Pythons"; err != nil || !strings.Contains(string(b), want) {
				t.Errorf("pod %s's log lacks %q (%v):\n%s", p, want, err, b)
			}
		}
	})

	testArena(t, ctx)
	testLifecycle(t, ctx)
}

// patchSpec merge-patches the TrainJob's spec.
func patchSpec(t *testing.T, ctx context.Context, name, spec string) {
	t.Helper()
	err := cl.Client.CoreV1().RESTClient().Patch(types.MergePatchType).
		AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs", name).
		Body([]byte(`{"spec":` + spec + `}`)).Do(ctx).Error()
	if err != nil {
		t.Fatalf("patch %s: %v", name, err)
	}
}

// livePods counts the job's pods that are pending or running.
func livePods(t *testing.T, ctx context.Context, name string) int {
	t.Helper()
	pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, name+"-a") && (p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning) && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// The operator on a real cluster says why a job cannot start (an image that cannot be
// pulled, more GPUs than the node has, a missing PVC), fails a job that exhausts
// maxRestarts with the worker's own reason and no pods left, ends one past its
// activeDeadlineSeconds, suspends and resumes one, deletes an ended one after its TTL,
// and uninstall refuses while TrainJobs exist.
func testLifecycle(t *testing.T, ctx context.Context) {
	t.Run("why a job cannot start", func(t *testing.T) {
		short := []string{"python3", "-c", "print('never')"}
		job{name: "bad-image", command: short, image: "localhost/nonexistent:1"}.submit(t, ctx)
		job{name: "too-many-gpus", command: short, spec: "  resources: {gpu: 5}"}.submit(t, ctx)
		job{name: "no-pvc", command: short, volumes: "{name: data, persistentVolumeClaim: {claimName: nope}}"}.submit(t, ctx)
		waitStatus(t, "bad-image", 2*time.Minute, func(s trainJobStatus) bool { return s.hasReason("ErrImagePull", "ImagePullBackOff") })
		waitStatus(t, "too-many-gpus", 2*time.Minute, func(s trainJobStatus) bool { return s.hasReason("InsufficientGPU", "Unschedulable") })
		waitStatus(t, "no-pvc", 2*time.Minute, func(s trainJobStatus) bool { return s.hasReason("MissingVolume") })
		for _, name := range []string{"bad-image", "too-many-gpus", "no-pvc"} {
			trainyardCmd(t, ctx, "delete", "--kube", name)
		}
	})

	t.Run("maxRestarts exhausted", func(t *testing.T) {
		job{name: "crash", spec: "  maxRestarts: 1\n  ttlSecondsAfterFinished: 20",
			command: []string{"python3", "-c", "import sys; print('boom', flush=True); sys.exit(3)"}}.submit(t, ctx)
		s := waitStatus(t, "crash", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Failed" })
		if s.Restarts != 1 || !strings.Contains(s.Message+s.Reason, "3") {
			t.Errorf("status %+v: want 1 restart and the worker's exit code 3 in the reason or message", s)
		}
		// The operator records Failed first and stops what still runs in the next reconcile
		// (a worker of the last attempt may not have reached its own exit yet).
		waitFor(t, "the failed job's running pods to be stopped", time.Minute, func() bool { return livePods(t, ctx, "crash") == 0 })
		// ttlSecondsAfterFinished deletes the job's Services and pods; the TrainJob and its
		// logs stay (see the field's documentation).
		waitFor(t, "the ended job's pods and Services to go after its TTL", 2*time.Minute, func() bool {
			pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			svcs, serr := cl.Client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
			if err != nil || serr != nil {
				return false
			}
			for _, p := range pods.Items {
				if strings.HasPrefix(p.Name, "crash-a") {
					return false
				}
			}
			for _, s := range svcs.Items {
				if strings.HasPrefix(s.Name, "crash-a") {
					return false
				}
			}
			return true
		})
		getStatus(t, ctx, "crash")
		trainyardCmd(t, ctx, "delete", "--kube", "crash")
	})

	long := []string{"python3", "-c", "import time; time.sleep(600)"}
	t.Run("activeDeadlineSeconds", func(t *testing.T) {
		job{name: "deadline", command: long, spec: "  activeDeadlineSeconds: 15"}.submit(t, ctx)
		s := waitStatus(t, "deadline", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Failed" })
		if !s.hasReason("DeadlineExceeded") {
			t.Errorf("status %+v, want Failed with DeadlineExceeded", s)
		}
		trainyardCmd(t, ctx, "delete", "--kube", "deadline")
	})

	t.Run("suspend and resume", func(t *testing.T) {
		job{name: "pausable", command: long}.submit(t, ctx)
		waitStatus(t, "pausable", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		patchSpec(t, ctx, "pausable", `{"suspend":true}`)
		waitStatus(t, "pausable", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Suspended" })
		waitFor(t, "the suspended job's pods to go", time.Minute, func() bool { return livePods(t, ctx, "pausable") == 0 })
		patchSpec(t, ctx, "pausable", `{"suspend":false}`)
		s := waitStatus(t, "pausable", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		if s.Restarts != 0 {
			t.Errorf("status %+v: a suspension counted as a restart", s)
		}
	})

	t.Run("uninstall refuses while TrainJobs exist", func(t *testing.T) {
		code, _, errOut := trainyardCmd(t, ctx, "uninstall")
		if code != 2 || !strings.Contains(errOut, "uninstalling would delete") {
			t.Errorf("uninstall with a TrainJob: exit %d, %q; want 2 and a refusal", code, errOut)
		}
		trainyardCmd(t, ctx, "delete", "--kube", "pausable")
	})
}

// waitFor polls ok every second until it holds, failing after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(time.Second)
	}
}

// workerPod returns the running pod of the job's worker index.
func workerPod(t *testing.T, ctx context.Context, job string, index int) string {
	t.Helper()
	pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s=%d", workload.LabelWorkerIndex, index),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, job+"-a") && p.Status.Phase == corev1.PodRunning {
			return p.Name
		}
	}
	t.Fatalf("no running pod of %s's worker %d among %d pods", job, index, len(pods.Items))
	return ""
}

// killPython SIGKILLs the Python processes in the pod's worker container.
func killPython(t *testing.T, pod string) {
	t.Helper()
	out, err := cl.KillPython(context.Background(), "default", pod, "worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in %s: %s", pod, out)
}
