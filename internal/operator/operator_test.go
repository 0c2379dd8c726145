package operator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/testkube"
	"github.com/trainyard/trainyard/internal/workload"
)

// cluster is a real API server with the operator running against it. There is no
// kubelet, scheduler or Job controller: tests make the pods and set their status as
// those would.
type cluster struct {
	t  *testing.T
	c  client.Client
	ns string
}

var shared *cluster

// roomProbeClass is the room probes' PriorityClass in TestOperator.
const roomProbeClass = "trainyard-operator-room-probe"

func TestOperator(t *testing.T) {
	env := testkube.Start(t, testkube.Options{CRDs: []string{"internal/operator/testdata/kueue-crds.yaml"}})
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The room probes' PriorityClass, as trainyard install makes it.
	class := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
		"metadata": map[string]any{"name": roomProbeClass}, "value": int64(0), "preemptionPolicy": "Never"}}
	if err := env.Client.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	// Progress is read often, from the pods that serve it (testInPlace's worker 0). The
	// control plane has no scheduler, so no pod is ever bound or refused: gang placement,
	// which waits for the scheduler's answer, is off (test/cluster tests it).
	mgr, err := operator.NewManager(env.Config, operator.Options{Image: "ghcr.io/trainyard/trainyard:test", ProbeAddr: "0",
		ProgressInterval: 100 * time.Millisecond, RoomProbePriorityClass: roomProbeClass, GangPlacement: operator.GangPlacementOff}, logger)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		fn   func(*cluster)
	}{
		{"creation", testCreation},
		{"restart after a worker fails", testRestart},
		{"max restarts", testMaxRestarts},
		{"eviction does not count", testEviction},
		{"disruptions are capped", testMaxDisruptions},
		{"success and progress", testSuccess},
		{"restart in place", testInPlace},
		{"suspend and resume", testSuspend},
		{"active deadline", testActiveDeadline},
		{"pre-running reasons and deadline", testPreRunning},
		{"config problems", testConfigProblems},
		{"ttl after finished", testTTL},
		{"kueue", testKueue},
		{"kueue suspend", testKueueSuspend},
		{"kueue partial admission", testKueueElastic},
		{"elastic shrink", testElasticShrink},
		{"elastic shrink in place", testElasticShrinkInPlace},
		{"elastic grow in place", testElasticGrowInPlace},
		{"elastic lost node", testElasticLostNode},
		{"elastic lost node gone for good", testElasticLostNodeGoneForGood},
		{"elastic shrink at the pre-running deadline", testElasticShrinkAtDeadline},
		{"elastic gang grows into room", testElasticGrowsIntoRoom},
		{"room probes refused", testRoomProbesRefused},
		{"kueue elastic shrink", testKueueElasticShrink},
		{"kueue workload slices", testKueueSliceGrow},
		{"kueue workload slice beside", testKueueSliceBeside},
		{"bad pod template", testBadTemplate},
		{"bad input is not restarted", testBadInput},
		{"git source and tensorboard", testGitAndTensorBoard},
		{"a clone that fails", testCloneFails},
		{"workers that cloned different commits", testSplitClone},
		{"pod policy", testPodPolicy},
		{"pod spec frozen after admission", testFrozenPodSpec},
		{"network policy", testNetworkPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			tc.fn(&cluster{t: t, c: env.Client, ns: ns})
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func ptr[T any](v T) *T { return &v }

func (k *cluster) newJob(name string, workers int32, change func(*v1.TrainJob)) *v1.TrainJob {
	k.t.Helper()
	j := &v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns},
		Spec: v1.TrainJobSpec{Workers: ptr(workers), Command: []string{"python3", "train.py"},
			Kubernetes: &v1.KubernetesSpec{Image: "pytorch/pytorch:2.5.1"}},
	}
	if change != nil {
		change(j)
	}
	if err := k.c.Create(context.Background(), j); err != nil {
		k.t.Fatalf("create TrainJob %s: %v", name, err)
	}
	return j
}

// eventually polls cond until it holds, for up to 30 s.
func (k *cluster) eventually(what string, cond func() (bool, string)) {
	k.t.Helper()
	k.eventuallyWithin(30*time.Second, what, cond)
}

// eventuallyWithin polls cond until it holds, for up to limit.
func (k *cluster) eventuallyWithin(limit time.Duration, what string, cond func() (bool, string)) {
	k.t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(50 * time.Millisecond)
	}
	k.t.Fatalf("timed out waiting for %s; last seen: %s", what, last)
}

func (k *cluster) get(name string) *v1.TrainJob {
	k.t.Helper()
	var j v1.TrainJob
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: name}, &j); err != nil {
		k.t.Fatal(err)
	}
	return &j
}

// waitStatus waits until the TrainJob's status satisfies cond.
func (k *cluster) waitStatus(name, what string, cond func(*v1.TrainJobStatus) bool) *v1.TrainJob {
	k.t.Helper()
	var j *v1.TrainJob
	k.eventually(name+": "+what, func() (bool, string) {
		j = k.get(name)
		return cond(&j.Status), fmt.Sprintf("%+v", j.Status)
	})
	return j
}

func cond(st *v1.TrainJobStatus, kind string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, kind)
}

func hasCond(st *v1.TrainJobStatus, kind string, status metav1.ConditionStatus, reason string) bool {
	c := cond(st, kind)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
}

// attempt waits for attempt n's Service and every worker's pod, and returns the pods in
// worker order.
func (k *cluster) attempt(name string, n int) []*corev1.Pod {
	k.t.Helper()
	var out []*corev1.Pod
	key := client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName(name, n)}
	k.eventually(key.Name+" Service and pods", func() (bool, string) {
		if err := k.c.Get(context.Background(), key, &corev1.Service{}); err != nil {
			return false, fmt.Sprintf("%v; TrainJob status %+v", err, k.get(name).Status)
		}
		workers := k.get(name).GangSize() // what Kueue admitted of an elastic gang
		out = make([]*corev1.Pod, workers)
		pods := k.pods(name, n)
		for i := range pods {
			if w := workload.WorkerIndex(pods[i].Labels); w >= 0 && w < workers {
				out[w] = &pods[i]
			}
		}
		return len(pods) == workers, fmt.Sprintf("%d of %d pods", len(pods), workers)
	})
	return out
}

// gone waits until attempt n has no Service or pod left.
func (k *cluster) gone(name string, n int) {
	k.t.Helper()
	key := client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName(name, n)}
	k.eventually(key.Name+" gone", func() (bool, string) {
		if err := k.c.Get(context.Background(), key, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return false, "Service still there"
		}
		pods := k.pods(name, n)
		return len(pods) == 0, fmt.Sprintf("%d pods left", len(pods))
	})
}

func (k *cluster) pods(name string, n int) []corev1.Pod {
	var l corev1.PodList
	if err := k.c.List(context.Background(), &l, client.InNamespace(k.ns),
		client.MatchingLabels{workload.LabelJob: name, workload.LabelAttempt: strconv.Itoa(n)}); err != nil {
		k.t.Fatal(err)
	}
	return l.Items
}

// setPod sets a pod's status as the kubelet would.
func (k *cluster) setPod(p *corev1.Pod, change func(*corev1.PodStatus)) {
	k.t.Helper()
	if err := k.trySetPod(p, change); err != nil {
		k.t.Fatal(err)
	}
}

// trySetPod is setPod returning the error, for a pod the operator may be deleting.
func (k *cluster) trySetPod(p *corev1.Pod, change func(*corev1.PodStatus)) error {
	for range 10 {
		var cur corev1.Pod
		if err := k.c.Get(context.Background(), client.ObjectKeyFromObject(p), &cur); err != nil {
			return err
		}
		change(&cur.Status)
		err := k.c.Status().Update(context.Background(), &cur)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return errors.New("pod status: too many conflicts")
}

func running(st *corev1.PodStatus) {
	st.Phase = corev1.PodRunning
	st.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
}

func exited(code int32, msg string) func(*corev1.PodStatus) {
	return func(st *corev1.PodStatus) {
		st.Phase = corev1.PodSucceeded
		if code != 0 {
			st.Phase = corev1.PodFailed
		}
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}}}}
	}
}

func (k *cluster) runAll(name string, n int) []*corev1.Pod {
	k.t.Helper()
	pods := k.attempt(name, n)
	for _, p := range pods {
		k.setPod(p, running)
	}
	return pods
}

// event waits for an event about the TrainJob with this reason, and returns its note.
func (k *cluster) event(name, reason string) string { return k.eventSaying(name, reason, "") }

// eventSaying waits for an event about the TrainJob with this reason whose note says
// want, and returns its note.
func (k *cluster) eventSaying(name, reason, want string) string {
	k.t.Helper()
	_, note := k.eventTyped(name, reason, want)
	return note
}

// eventTyped is eventSaying, which also returns the event's type (Normal, Warning).
func (k *cluster) eventTyped(name, reason, want string) (kind, note string) {
	k.t.Helper()
	k.eventually("event "+reason+" saying "+want, func() (bool, string) {
		var l eventsv1.EventList
		if err := k.c.List(context.Background(), &l, client.InNamespace(k.ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range l.Items {
			if e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, want) {
				kind, note = e.Type, e.Note
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return false, strings.Join(seen, " | ")
	})
	return kind, note
}

func testCreation(k *cluster) {
	tj := k.newJob("mnist", 3, func(j *v1.TrainJob) { j.Spec.Resources.GPU = 2 })
	for i, p := range k.attempt("mnist", 1) {
		if owner := metav1.GetControllerOf(p); owner == nil || owner.UID != k.get("mnist").UID {
			k.t.Errorf("pod %s's controller is %v, want the TrainJob", p.Name, owner)
		}
		if want := fmt.Sprintf("mnist-a1-%d", i); p.Name != want || p.Spec.Hostname != want || p.Spec.Subdomain != "mnist-a1" {
			k.t.Errorf("pod %d: name %s host name %s subdomain %s; want %s under mnist-a1", i, p.Name, p.Spec.Hostname, p.Spec.Subdomain, want)
		}
		// The job names no CPU or memory: with Options.WorkerPerGPU nil, the built-in 2 CPUs
		// and 8Gi per GPU, as requests only.
		if r := p.Spec.Containers[0].Resources; r.Requests.Cpu().String() != "4" || r.Requests.Memory().String() != "16Gi" ||
			r.Limits.Cpu().Value() != 0 || r.Limits.Memory().Value() != 0 {
			k.t.Errorf("pod %d: resources %+v; want requests of 4 CPUs and 16Gi for its 2 GPUs, no CPU or memory limit", i, r)
		}
	}
	var gang corev1.Secret
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: workload.GangSecretName("mnist")}, &gang); err != nil {
		k.t.Fatalf("the gang Secret: %v", err)
	}
	if owner := metav1.GetControllerOf(&gang); owner == nil || owner.UID != k.get("mnist").UID || len(gang.Data[workload.GangSecretKey]) != 64 {
		k.t.Errorf("the gang Secret: owner %v, %d bytes of key; want the TrainJob's, 64 hex digits", owner, len(gang.Data[workload.GangSecretKey]))
	}
	for _, e := range k.attempt("mnist", 1)[2].Spec.Containers[0].Env {
		if e.Name == workload.EnvGangSecret && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != gang.Name) {
			k.t.Errorf("worker 2's %s: %+v; want it from the Secret %s", e.Name, e, gang.Name)
		}
	}
	// A Secret of the gang's name that the job does not own would give its workers a key
	// someone else chose: the job fails, saying so, with no pods.
	k.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: workload.GangSecretName("squatted"), Namespace: k.ns},
		StringData: map[string]string{workload.GangSecretKey: "chosen"}})
	k.newJob("squatted", 1, nil)
	st := k.waitStatus("squatted", "refused", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseFailed })
	if !hasCond(&st.Status, v1.CondFailed, metav1.ConditionTrue, "GangSecretConflict") || len(k.pods("squatted", 1)) != 0 {
		k.t.Errorf("a job whose gang Secret is someone else's: %+v, %d pods", st.Status, len(k.pods("squatted", 1)))
	}
	got := k.waitStatus("mnist", "created", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 1 && st.Phase == v1.PhasePending && hasCond(st, v1.CondCreated, metav1.ConditionTrue, "AttemptCreated")
	})
	if got.Status.RunDir != "/trainyard/results/mnist-"+strings.ReplaceAll(string(got.UID), "-", "")[:8] {
		k.t.Errorf("run dir %q", got.Status.RunDir)
	}
	k.event("mnist", "AttemptCreated")
	k.event("mnist", "EphemeralStorage")
	pods := k.runAll("mnist", 1)
	k.waitStatus("mnist", "running", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.WorkersReady == 3 && hasCond(st, v1.CondRunning, metav1.ConditionTrue, "AllWorkersRunning")
	})
	if len(pods) != 3 || tj.Name != "mnist" {
		k.t.Errorf("%d pods for %s", len(pods), tj.Name)
	}
}

func testRestart(k *cluster) {
	k.newJob("flaky", 2, func(j *v1.TrainJob) { j.Spec.MaxRestarts = 2 })
	pods := k.runAll("flaky", 1)
	msg := workload.Summary{Worker: 1, Outcome: "failed", Reason: "rank 1 (worker 1, pid 42) exited with code 3"}
	k.setPod(pods[1], exited(3, string(msg.Encode())))
	k.attempt("flaky", 2)
	k.gone("flaky", 1)
	got := k.waitStatus("flaky", "restarting", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 2 && st.Restarts == 1 && st.Phase == v1.PhaseRestarting &&
			hasCond(st, v1.CondRestarting, metav1.ConditionTrue, "WorkerFailed")
	})
	if c := cond(&got.Status, v1.CondRestarting); !strings.Contains(c.Message, "rank 1 (worker 1, pid 42) exited with code 3") {
		k.t.Errorf("restarting message %q does not carry the worker's own reason", c.Message)
	}
	if note := k.event("flaky", "WorkerFailed"); !strings.Contains(note, "worker 1") {
		k.t.Errorf("WorkerFailed event: %q", note)
	}
	k.runAll("flaky", 2)
	k.waitStatus("flaky", "running again", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && hasCond(st, v1.CondRestarting, metav1.ConditionFalse, "")
	})
}

func testMaxRestarts(k *cluster) {
	k.newJob("doomed", 2, func(j *v1.TrainJob) { j.Spec.MaxRestarts = 1 })
	pods := k.runAll("doomed", 1)
	k.setPod(pods[0], exited(1, ""))
	pods = k.runAll("doomed", 2)
	k.setPod(pods[0], exited(1, ""))
	got := k.waitStatus("doomed", "failed", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, "WorkerFailed")
	})
	if !strings.Contains(got.Status.Reason, "no restarts left") || got.Status.CompletionTime == nil || got.Status.Restarts != 1 {
		k.t.Errorf("status %+v", got.Status)
	}
	// The worker still running is stopped (it would hold GPUs), the failed one stays with
	// its logs, and nothing replaces it.
	k.eventually("running pod deleted, Service deleted", func() (bool, string) {
		left := k.pods("doomed", 2)
		key := client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName("doomed", 2)}
		svcErr := k.c.Get(context.Background(), key, &corev1.Service{})
		return len(left) == 1 && left[0].Name == pods[0].Name && apierrors.IsNotFound(svcErr), fmt.Sprintf("%d pods, Service: %v", len(left), svcErr)
	})
	for range 6 { // a negative check: long enough for several reconciles
		if left := k.pods("doomed", 2); len(left) != 1 {
			k.t.Fatalf("%d pods after the job failed; want the failed one alone", len(left))
		}
		time.Sleep(250 * time.Millisecond)
	}
	k.event("doomed", "WorkerFailed")
}

// testEviction: an evicted worker's pod is replaced alone, under the same name, while
// the others keep theirs; worker 0's loss (its gang's coordinator) counts as a
// disruption, not a restart.
func testEviction(k *cluster) {
	k.newJob("evicted", 2, nil) // maxRestarts 0: only disruptions may restart it
	pods := k.runAll("evicted", 1)
	evict := func(st *corev1.PodStatus) {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "TerminationByKubelet", Message: "The node was low on resource: memory."})
	}
	k.setPod(pods[1], evict)
	k.eventually("worker 1's pod replaced", func() (bool, string) {
		var p corev1.Pod
		err := k.c.Get(context.Background(), client.ObjectKeyFromObject(pods[1]), &p)
		return err == nil && p.UID != pods[1].UID, fmt.Sprintf("%v (uid %s)", err, p.UID)
	})
	if note := k.event("evicted", "ReplacingWorker"); !strings.Contains(note, "low on resource") || !strings.Contains(note, "evicted-a1-1") {
		k.t.Errorf("ReplacingWorker event: %q", note)
	}
	now := k.attempt("evicted", 1)
	if now[0].UID != pods[0].UID {
		k.t.Error("worker 0's pod was replaced too; want it kept")
	}
	if st := k.get("evicted").Status; st.Attempt != 1 || st.Restarts != 0 || st.Phase == v1.PhaseFailed {
		k.t.Errorf("status after replacing worker 1: attempt %d restarts %d phase %s; want attempt 1 (its gang counts the loss)", st.Attempt, st.Restarts, st.Phase)
	}
	k.setPod(now[1], running)
	k.setPod(now[0], evict)
	got := k.waitStatus("evicted", "worker 0's loss counted as a disruption", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 1 && st.Restarts == 1 && st.Disruptions == 1 && st.Phase != v1.PhaseFailed
	})
	if r := got.Status.WorkerReplacements; len(r) != 2 || r[0] != 1 || r[1] != 1 {
		k.t.Errorf("workerReplacements %v; want [1 1]", r)
	}
	k.eventually("worker 0's pod replaced", func() (bool, string) {
		var p corev1.Pod
		err := k.c.Get(context.Background(), client.ObjectKeyFromObject(now[0]), &p)
		return err == nil && p.UID != now[0].UID, fmt.Sprintf("%v", err)
	})
}

func testSuccess(k *cluster) {
	k.newJob("good", 2, nil)
	pods := k.runAll("good", 1)
	sum := workload.Summary{Worker: 0, Outcome: "succeeded", Iteration: 5, Metrics: map[string]string{"accuracy": "84.2"},
		Checkpoint: "checkpoint_000005", RunDir: "/trainyard/results/good"}
	k.setPod(pods[1], exited(0, string(workload.Summary{Worker: 1, Outcome: "succeeded"}.Encode())))
	k.setPod(pods[0], exited(0, string(sum.Encode())))
	got := k.waitStatus("good", "succeeded", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseSucceeded && hasCond(st, v1.CondSucceeded, metav1.ConditionTrue, "AllWorkersSucceeded")
	})
	st := got.Status
	if st.Iteration != 5 || st.LastMetrics["accuracy"] != "84.2" || st.LatestCheckpoint != "checkpoint_000005" || st.CompletionTime == nil {
		k.t.Errorf("progress not in status: %+v", st)
	}
	k.event("good", "Succeeded")
}

func testSuspend(k *cluster) {
	k.newJob("pausable", 2, nil)
	k.runAll("pausable", 1)
	k.patchSpec("pausable", func(s *v1.TrainJobSpec) { s.Suspend = true })
	k.gone("pausable", 1)
	k.waitStatus("pausable", "suspended", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseSuspended && hasCond(st, v1.CondSuspended, metav1.ConditionTrue, "Suspended") && st.WorkersReady == 0
	})
	k.patchSpec("pausable", func(s *v1.TrainJobSpec) { s.Suspend = false })
	k.attempt("pausable", 2)
	k.waitStatus("pausable", "resumed", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 2 && st.Restarts == 0 && hasCond(st, v1.CondSuspended, metav1.ConditionFalse, "Resumed")
	})
	k.event("pausable", "Resumed")
}

func (k *cluster) patchSpec(name string, change func(*v1.TrainJobSpec)) {
	k.t.Helper()
	j := k.get(name)
	patch := client.MergeFrom(j.DeepCopy())
	change(&j.Spec)
	if err := k.c.Patch(context.Background(), j, patch); err != nil {
		k.t.Fatal(err)
	}
}

func testActiveDeadline(k *cluster) {
	k.newJob("slow", 1, func(j *v1.TrainJob) { j.Spec.ActiveDeadlineSeconds = ptr(int64(2)) })
	k.runAll("slow", 1)
	k.waitStatus("slow", "failed by the deadline", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, "DeadlineExceeded")
	})
	k.eventually("the running worker stopped", func() (bool, string) {
		n := len(k.pods("slow", 1))
		return n == 0, fmt.Sprintf("%d pods", n)
	})
}

func testPreRunning(k *cluster) {
	k.newJob("badimage", 2, func(j *v1.TrainJob) { j.Spec.PreRunningDeadlineSeconds = ptr(int64(3)) })
	pods := k.attempt("badimage", 1)
	k.setPod(pods[0], running)
	k.setPod(pods[1], func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "pytorch/pytorch:2.5.1"`}}}}
	})
	got := k.waitStatus("badimage", "image pull reason", func(st *v1.TrainJobStatus) bool {
		return hasCond(st, v1.CondRunning, metav1.ConditionFalse, "ImagePullBackOff")
	})
	if c := cond(&got.Status, v1.CondRunning); !strings.Contains(c.Message, "Back-off pulling image") {
		k.t.Errorf("condition message %q", c.Message)
	}
	k.event("badimage", "ImagePullBackOff")
	k.waitStatus("badimage", "failed by the pre-running deadline", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, "PreRunningDeadlineExceeded") &&
			strings.Contains(st.Reason, "Back-off pulling image")
	})

	k.newJob("unschedulable", 1, nil)
	pods = k.attempt("unschedulable", 1)
	k.setPod(pods[0], func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
	})
	got = k.waitStatus("unschedulable", "scheduler's message", func(st *v1.TrainJobStatus) bool {
		return hasCond(st, v1.CondRunning, metav1.ConditionFalse, "Unschedulable")
	})
	if c := cond(&got.Status, v1.CondRunning); !strings.Contains(c.Message, "3 Insufficient nvidia.com/gpu") {
		k.t.Errorf("condition message %q", c.Message)
	}
}

func testConfigProblems(k *cluster) {
	k.newJob("nopvc", 1, func(j *v1.TrainJob) {
		j.Spec.StoragePath = "/mnt/runs"
		j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "runs", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared-runs"}}}}
		j.Spec.Kubernetes.VolumeMounts = []corev1.VolumeMount{{Name: "runs", MountPath: "/mnt/runs"}}
	})
	got := k.waitStatus("nopvc", "missing volume", func(st *v1.TrainJobStatus) bool {
		return hasCond(st, v1.CondRunning, metav1.ConditionFalse, "MissingVolume")
	})
	if c := cond(&got.Status, v1.CondRunning); !strings.Contains(c.Message, `persistentvolumeclaim "shared-runs" does not exist`) {
		k.t.Errorf("condition message %q", c.Message)
	}
	// The scheduler then says Unschedulable for the same cause (as a real one does): the
	// precise reason stays.
	pods := k.attempt("nopvc", 1)
	k.setPod(pods[0], func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: `0/1 nodes are available: persistentvolumeclaim "shared-runs" not found.`}}
	})
	for i := 0; i < 20; i++ { // a negative check: long enough for several reconciles
		if c := cond(&k.get("nopvc").Status, v1.CondRunning); c.Reason != "MissingVolume" {
			k.t.Fatalf("with the scheduler's Unschedulable, condition %s %q; want MissingVolume", c.Reason, c.Message)
		}
		time.Sleep(500 * time.Millisecond)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-a"}}
	if err := k.c.Create(context.Background(), node); err != nil {
		k.t.Fatal(err)
	}
	node.Status.Capacity = corev1.ResourceList{workload.GPUResource: resource.MustParse("8")}
	node.Status.Allocatable = corev1.ResourceList{workload.GPUResource: resource.MustParse("8")}
	if err := k.c.Status().Update(context.Background(), node); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = k.c.Delete(context.Background(), node) })
	k.newJob("toobig", 2, func(j *v1.TrainJob) { j.Spec.Resources.GPU = 16 })
	got = k.waitStatus("toobig", "insufficient GPU", func(st *v1.TrainJobStatus) bool {
		return hasCond(st, v1.CondRunning, metav1.ConditionFalse, "InsufficientGPU")
	})
	if c := cond(&got.Status, v1.CondRunning); !strings.Contains(c.Message, "the most any of the 1 nodes has is 8 (gpu-node-a)") {
		k.t.Errorf("condition message %q", c.Message)
	}
}

func testTTL(k *cluster) {
	k.newJob("short-lived", 1, func(j *v1.TrainJob) { j.Spec.TTLSecondsAfterFinished = ptr(int64(1)) })
	pods := k.runAll("short-lived", 1)
	k.setPod(pods[0], exited(0, ""))
	k.waitStatus("short-lived", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
	k.gone("short-lived", 1)
	if note := k.event("short-lived", "CleanedUp"); !strings.Contains(note, "logs stay in /trainyard/results/short-lived-") {
		k.t.Errorf("CleanedUp event: %q", note)
	}
	if k.get("short-lived").Status.Phase != v1.PhaseSucceeded {
		k.t.Error("the TrainJob must stay, with its status")
	}
}

func testMaxDisruptions(k *cluster) {
	k.newJob("fragile", 1, func(j *v1.TrainJob) { j.Spec.MaxDisruptions = ptr(int32(1)) })
	uid := types.UID("")
	for range 2 {
		var pods []*corev1.Pod
		k.eventually("a new worker 0", func() (bool, string) {
			pods = k.attempt("fragile", 1)
			return pods[0].UID != uid, "the evicted pod is still there"
		})
		uid = pods[0].UID
		k.setPod(pods[0], running)
		k.setPod(pods[0], func(st *corev1.PodStatus) {
			st.Phase, st.Reason, st.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		})
	}
	got := k.waitStatus("fragile", "failed after too many disruptions", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed
	})
	if c := cond(&got.Status, v1.CondFailed); c.Reason != "TooManyDisruptions" || got.Status.Disruptions != 1 {
		k.t.Errorf("failed condition %s %q, disruptions %d; want TooManyDisruptions after 1", c.Reason, c.Message, got.Status.Disruptions)
	}
}

func testBadTemplate(k *cluster) {
	k.newJob("badtemplate", 1, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"spec": {"restartPolicyy": "Always"}}`)}
	})
	got := k.waitStatus("badtemplate", "failed", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, "InvalidPodTemplate")
	})
	if !strings.Contains(got.Status.Reason, "restartPolicyy") {
		k.t.Errorf("reason %q does not name the field", got.Status.Reason)
	}
}

func testBadInput(k *cluster) {
	k.newJob("nocommand", 2, func(j *v1.TrainJob) { j.Spec.MaxRestarts = 3 })
	pods := k.runAll("nocommand", 1)
	msg := workload.Summary{Worker: 1, Outcome: "failed", Reason: `the command "python3" is not in the image: exec: "python3": executable file not found in $PATH`}
	k.setPod(pods[1], exited(2, string(msg.Encode())))
	got := k.waitStatus("nocommand", "failed without restarts", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, "WorkerInputError")
	})
	if got.Status.Restarts != 0 || !strings.Contains(got.Status.Reason, "not in the image") {
		k.t.Errorf("status %+v", got.Status)
	}
}
