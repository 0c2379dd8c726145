package operator

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

var gangT0 = time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)

// gangJob is TrainJob name of 3 workers x 1 GPU, made age seconds after gangT0.
func gangJobObject(name string, age int) *v1.TrainJob {
	j := newTrainJob()
	j.Name, j.UID = name, types.UID("uid-"+name)
	j.CreationTimestamp = metav1.NewTime(gangT0.Add(time.Duration(age) * time.Second))
	j.Spec.Workers = ptr(int32(3))
	j.Spec.Resources.GPU = 1
	return j
}

// gangPods are the 3 pods of attempt 1 of job, the first bound of them on a node and the
// others refused by the scheduler at gangT0.
func gangPods(job *v1.TrainJob, bound int) []client.Object {
	var out []client.Object
	for i := range 3 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: workload.PodName(job.Name, 1, i), Namespace: job.Namespace,
			Labels: map[string]string{workload.LabelJobUID: string(job.UID), workload.LabelJob: job.Name,
				workload.LabelAttempt: "1", workload.LabelWorkerIndex: strconv.Itoa(i)}}}
		if i < bound {
			p.Spec.NodeName = "node-a"
			p.Status.Phase = corev1.PodPending // bound, its containers starting
		} else {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
				LastTransitionTime: metav1.NewTime(gangT0)}}
		}
		out = append(out, p)
	}
	return out
}

// gangReconciler is a Reconciler on the fake client holding objs, at the clock now.
func gangReconciler(now *time.Time, objs ...client.Object) *Reconciler {
	byUID := func(obj client.Object) []string {
		if uid := obj.GetLabels()[workload.LabelJobUID]; uid != "" {
			return []string{uid}
		}
		return nil
	}
	b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
		WithIndex(&corev1.Service{}, uidIndex, byUID).WithIndex(&corev1.Pod{}, uidIndex, byUID)
	for _, o := range objs {
		if j, ok := o.(*v1.TrainJob); ok {
			b = b.WithStatusSubresource(j)
		}
	}
	c := b.Build()
	return &Reconciler{Client: c, Reader: c, Options: Options{Image: "trainyard:test"}, Now: func() time.Time { return *now }}
}

func reconcileJob(t *testing.T, r *Reconciler, name string) *v1.TrainJob {
	t.Helper()
	key := types.NamespacedName{Namespace: "default", Name: name}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
	var j v1.TrainJob
	if err := r.Client.Get(context.Background(), key, &j); err != nil {
		t.Fatal(err)
	}
	return &j
}

func podCount(t *testing.T, r *Reconciler, job string) int {
	t.Helper()
	var pods corev1.PodList
	if err := r.Client.List(context.Background(), &pods, client.MatchingLabels{workload.LabelJob: job}); err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// Two gangs made together: the older makes its pods, the younger waits and says for whom.
func TestGangsMakeTheirPodsOneAtATime(t *testing.T) {
	now := gangT0.Add(2 * time.Second)
	r := gangReconciler(&now, gangJobObject("a", 0), gangJobObject("b", 1))
	b := reconcileJob(t, r, "b")
	if n := podCount(t, r, "b"); n != 0 || !strings.Contains(b.Status.Reason, "gang default/a, ahead of it, starts first") {
		t.Fatalf("b made %d pods with reason %q; want none while the older gang a has not started", n, b.Status.Reason)
	}
	reconcileJob(t, r, "a")
	if n := podCount(t, r, "a"); n != 3 {
		t.Fatalf("a made %d pods; want 3", n)
	}
	b = reconcileJob(t, r, "b")
	if n := podCount(t, r, "b"); n != 0 || !strings.Contains(b.Status.Reason, "waiting while the pods of gang default/a are placed") {
		t.Fatalf("b made %d pods with reason %q; want none while a's are placed", n, b.Status.Reason)
	}
	// A gang that needs no GPU does not wait for those that do.
	cpu := gangJobObject("cpu", 2)
	cpu.Spec.Resources.GPU = 0
	if err := r.Client.Create(context.Background(), cpu); err != nil {
		t.Fatal(err)
	}
	reconcileJob(t, r, "cpu")
	if n := podCount(t, r, "cpu"); n != 3 {
		t.Errorf("cpu made %d pods; want 3: it needs no GPU", n)
	}
}

// Two gangs placed in part (the split of the issue): the younger gives its room back, as
// a new attempt that is not a restart, and the older keeps its pods; an operator that
// restarts counts room as freed for it.
func TestSplitGangGivesWay(t *testing.T) {
	now := gangT0.Add(5 * time.Second)
	a, b := gangJobObject("a", 0), gangJobObject("b", 1)
	for _, j := range []*v1.TrainJob{a, b} {
		j.Status = v1.TrainJobStatus{Attempt: 1, Phase: v1.PhasePending}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{workload.GPUResource: resource.MustParse("4")},
		Allocatable: corev1.ResourceList{workload.GPUResource: resource.MustParse("4")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	objs := append([]client.Object{a, b, node}, append(gangPods(a, 2), gangPods(b, 2)...)...)
	r := gangReconciler(&now, objs...)
	got := reconcileJob(t, r, "b")
	c := meta.FindStatusCondition(got.Status.Conditions, v1.CondWaitingForRoom)
	if got.Status.Attempt != 2 || got.Status.Restarts != 0 || got.Status.GivenBack != 1 || c == nil || c.Reason != v1.ReasonGaveWay {
		t.Fatalf("b: attempt %d, restarts %d, given back %d, condition %+v (%s); want attempt 2 after giving way", got.Status.Attempt,
			got.Status.Restarts, got.Status.GivenBack, c, got.Status.Reason)
	}
	for _, want := range []string{"attempt 1 gave back the room of its 2 placed worker(s) to gang default/a", "needs room for 1 more worker(s) (it holds 2 GPUs)",
		"worker 2's pod b-a1-2: 0/1 nodes are available", "attempt 2 waits for room (not a restart)"} {
		if !strings.Contains(got.Status.Reason, want) {
			t.Errorf("b's reason %q lacks %q", got.Status.Reason, want)
		}
	}
	kept := reconcileJob(t, r, "a")
	if kept.Status.Attempt != 1 || !strings.Contains(kept.Status.Reason, "2 of its 3 workers placed, waiting for room for 1 more; it gives their room back if none comes within 2m0s") {
		t.Errorf("a: attempt %d, reason %q; want it to keep attempt 1 and say what it waits for", kept.Status.Attempt, kept.Status.Reason)
	}
	// b tears attempt 1 down, then waits with no pods: it gave back, and no room was freed.
	for range 2 {
		got = reconcileJob(t, r, "b")
	}
	if got.Status.Attempt != 2 || !strings.Contains(got.Status.Reason, "waiting for room: gang default/a, ahead of it") {
		t.Errorf("b: attempt %d, reason %q; want it waiting behind a", got.Status.Attempt, got.Status.Reason)
	}
	// a ends: room is freed, and b (alone now) makes attempt 2's pods.
	if err := r.Client.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	r.gangs.placing = nil // and an operator that restarts, remembering nothing, does the same
	r.gangs.gaveBack = nil
	got = reconcileJob(t, r, "b")
	var pods corev1.PodList
	if err := r.Client.List(context.Background(), &pods, client.MatchingLabels{workload.LabelJob: "b", workload.LabelAttempt: "2"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("b made %d pods of attempt 2 once a was gone (reason %q); want 3", len(pods.Items), got.Status.Reason)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.CondWaitingForRoom); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("b's WaitingForRoom condition %+v; want false once it places again", c)
	}
}

// An attempt that ends while a worker's pod was never placed (gang placement off, as
// main had it) says which pod and why, beside worker 0's own words.
func TestAttemptEndedWhileAWorkerWaitedForRoom(t *testing.T) {
	now := gangT0.Add(7 * time.Minute)
	job := gangJobObject("late", 0)
	job.Status = v1.TrainJobStatus{Attempt: 1, Phase: v1.PhasePending}
	pods := gangPods(job, 2)
	w0 := pods[0].(*corev1.Pod)
	w0.Status.Phase = corev1.PodFailed
	w0.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
			Message: `{"worker":0,"outcome":"failed","reason":"attempt 1 could not start: worker 2 did not connect to worker 0 within 6m0s"}`}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	r := gangReconciler(&now, append([]client.Object{job, node}, pods...)...)
	r.Options.GangPlacement = GangPlacementOff
	got := reconcileJob(t, r, "late")
	want := "the scheduler never placed worker 2 (pod late-a1-2): 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
	if got.Status.Phase != v1.PhaseFailed || !strings.Contains(got.Status.Reason, want) {
		t.Errorf("late: %s, %q; want it Failed, saying %q", got.Status.Phase, got.Status.Reason, want)
	}
}
