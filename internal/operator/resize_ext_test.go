package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/workload"
)

// unschedulableSince makes a pod Pending with the scheduler's Unschedulable since ago.
func unschedulableSince(ago time.Duration) func(*corev1.PodStatus) {
	return func(st *corev1.PodStatus) {
		st.Phase, st.ContainerStatuses = corev1.PodPending, nil
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 1 Insufficient nvidia.com/gpu",
			LastTransitionTime: metav1.NewTime(time.Now().Add(-ago))}}
	}
}

// podEnv is the worker container's environment, by name.
func podEnv(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

// An elastic 2:4 gang whose workers 2 and 3 cannot be scheduled past the elastic settle
// time (30 s by default) restarts with 2 workers as the next attempt, using no restart,
// and says so. (Its worker 0 serves no progress here, so it cannot shrink in place.) The
// new pod set keeps all 4 indices, workers 2 and 3 dropped from the start (no pods, and
// TRAINYARD_DROPPED_WORKERS in the others'), so that the gang can grow back in place; the
// job in the pods keeps the gang's bounds.
func testElasticShrink(k *cluster) {
	k.newJob("shrink", 4, func(j *v1.TrainJob) { j.Spec.MinWorkers = ptr(int32(2)) })
	pods := k.runAll("shrink", 1)
	k.waitStatus("shrink", "running", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseRunning })
	k.setPod(pods[2], unschedulableSince(28*time.Second))
	k.setPod(pods[3], unschedulableSince(time.Minute))
	note := k.event("shrink", operator.ReasonResized)
	if !strings.Contains(note, "resized from 4 to 2 workers: workers 2, 3 cannot be scheduled for 30s (0/2 nodes are available") {
		k.t.Errorf("Resized event %q; want from 4 to 2 and why", note)
	}
	got := k.waitStatus("shrink", "attempt 2 with 2 workers", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 2 && st.Workers == 2
	})
	if got.Status.Restarts != 0 || got.Status.Disruptions != 0 || !hasCond(&got.Status, v1.CondRestarting, metav1.ConditionTrue, operator.ReasonResized) {
		k.t.Errorf("status %+v; want no restart or disruption counted, Restarting for %s", got.Status, operator.ReasonResized)
	}
	if d := got.Status.DroppedWorkers; !slices.Equal(d, []int32{2, 3}) {
		k.t.Errorf("status.droppedWorkers %v; want [2 3], dropped from the new pod set's start", d)
	}
	k.gone("shrink", 1)
	for _, p := range k.attempt("shrink", 2) {
		env := podEnv(p)
		var job v1.TrainJob
		_ = json.Unmarshal([]byte(env[workload.EnvJob]), &job)
		if job.Spec.WorkerCount() != 4 || job.Spec.MinWorkerCount() != 2 || env[workload.EnvDroppedWorkers] != "2,3" {
			k.t.Errorf("pod %s: job of %d workers (at least %d), %s=%q; want 2:4 workers, 2 and 3 dropped", p.Name,
				job.Spec.WorkerCount(), job.Spec.MinWorkerCount(), workload.EnvDroppedWorkers, env[workload.EnvDroppedWorkers])
		}
	}
	if n := len(k.pods("shrink", 2)); n != 2 {
		k.t.Fatalf("attempt 2 has %d pods; want 2", n)
	}
	k.runAll("shrink", 2)
	k.waitStatus("shrink", "running with 2", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.WorkersReady == 2 && !hasCond(st, v1.CondRestarting, metav1.ConditionTrue, "")
	})
	for _, p := range k.pods("shrink", 2) {
		k.setPod(&p, exited(0, ""))
	}
	got = k.waitStatus("shrink", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
	if !strings.Contains(got.Status.Reason, "all 2 workers succeeded") || got.Status.Restarts != 0 {
		k.t.Errorf("status %+v; want all 2 workers succeeded, no restart", got.Status)
	}
	k.eventually("no room probe left once the job ended", func() (bool, string) {
		n := len(k.probes())
		return n == 0, fmt.Sprintf("%d probes", n)
	})
}

// An elastic gang whose pre-running deadline (2 s) comes before the settle time (30 s)
// shrinks at the deadline rather than failing: worker 2 of 2:3 unschedulable for 1 s.
func testElasticShrinkAtDeadline(k *cluster) {
	k.newJob("deadline", 3, func(j *v1.TrainJob) {
		j.Spec.MinWorkers = ptr(int32(2))
		j.Spec.PreRunningDeadlineSeconds = ptr(int64(2))
	})
	pods := k.attempt("deadline", 1)
	k.setPod(pods[0], running)
	k.setPod(pods[1], running)
	k.setPod(pods[2], unschedulableSince(time.Second))
	k.eventSaying("deadline", operator.ReasonResized, "resized from 3 to 2 workers: worker 2 cannot be scheduled by the attempt's pre-running deadline")
	got := k.waitStatus("deadline", "attempt 2 with 2 workers", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 2 && st.Workers == 2
	})
	if got.Status.Phase == v1.PhaseFailed || got.Status.Restarts != 0 {
		k.t.Errorf("status %+v; want a resize, not a failure or a restart", got.Status)
	}
}

// An elastic 2:4 gang shrunk for want of room (no node lost) looks for room with probes:
// two pods shaped like its workers, with the pause image and nothing of the job's, at
// priority 0. Once the scheduler places both (here: bound by hand to a node), the gang
// grows back to 4 (resizeIntervalSeconds 1: a second later at the latest), with no
// restart used, and the probes are deleted.
func testElasticGrowsIntoRoom(k *cluster) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.ns + "-c"}}
	if err := k.c.Create(ctx, node); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = k.c.Delete(context.Background(), node) })
	k.newJob("room", 4, func(j *v1.TrainJob) {
		j.Spec.MinWorkers, j.Spec.ResizeIntervalSeconds = ptr(int32(2)), ptr(int64(1))
	})
	pods := k.attempt("room", 1)
	k.setPod(pods[0], running)
	k.setPod(pods[1], running)
	k.setPod(pods[2], unschedulableSince(28*time.Second)) // both, once the second is
	k.setPod(pods[3], unschedulableSince(time.Minute))
	k.waitStatus("room", "shrunk to 2", func(st *v1.TrainJobStatus) bool { return st.Attempt == 2 && st.Workers == 2 })
	k.runAll("room", 2)
	k.bindProbes("room", 2, node.Name, func(p corev1.Pod) {
		c := p.Spec.Containers[0]
		if c.Image != operator.DefaultRoomProbeImage || c.Command != nil || c.Env != nil || deref(p.Spec.Priority) != int32(0) ||
			p.Spec.PriorityClassName != roomProbeClass || deref(p.Spec.PreemptionPolicy) != corev1.PreemptNever {
			k.t.Errorf("probe %s: image %s, command %q, env %v, priority %v (%s, %v); want the pause image, nothing of the job's, "+
				"priority 0 in %s, preempting nothing", p.Name, c.Image, c.Command, c.Env, deref(p.Spec.Priority), p.Spec.PriorityClassName,
				deref(p.Spec.PreemptionPolicy), roomProbeClass)
		}
	})
	got := k.waitStatus("room", "grown to 4", func(st *v1.TrainJobStatus) bool { return st.Attempt == 3 && st.Workers == 0 })
	k.eventSaying("room", operator.ReasonResized, "resized from 2 to 4 workers: room for 2 more worker(s): room probes placed on "+node.Name)
	if got.Status.Restarts != 0 {
		k.t.Errorf("status %+v; want the resizes to use no restart", got.Status)
	}
	k.eventually("the probes deleted", func() (bool, string) {
		n := len(k.probes())
		return n == 0, fmt.Sprintf("%d probes", n)
	})
	if n := len(k.attempt("room", 3)); n != 4 {
		k.t.Errorf("attempt 3 has %d pods; want 4", n)
	}
}

// Room probes the API server refuses (here a ResourceQuota of pods that they would
// exceed) count as no room: an Event says so and when the operator asks again, and the
// gang runs on at its smaller size.
func testRoomProbesRefused(k *cluster) {
	ctx := context.Background()
	k.newJob("quota", 3, func(j *v1.TrainJob) { j.Spec.MinWorkers = ptr(int32(2)) })
	pods := k.attempt("quota", 1)
	k.setPod(pods[0], running)
	k.setPod(pods[1], running)
	k.setPod(pods[2], unschedulableSince(time.Minute))
	k.waitStatus("quota", "shrunk to 2", func(st *v1.TrainJobStatus) bool { return st.Attempt == 2 && st.Workers == 2 })
	var l corev1.PodList
	k.eventually("attempt 2's pods, and no others", func() (bool, string) {
		if err := k.c.List(ctx, &l, client.InNamespace(k.ns)); err != nil {
			k.t.Fatal(err)
		}
		return len(l.Items) == 2 && len(k.attempt("quota", 2)) == 2, fmt.Sprintf("%d pods", len(l.Items))
	})
	full := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: k.ns}, Spec: corev1.ResourceQuotaSpec{Hard: full}}
	if err := k.c.Create(ctx, q); err != nil {
		k.t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: full, Used: full} // as the quota controller would say
	if err := k.c.Status().Update(ctx, q); err != nil {
		k.t.Fatal(err)
	}
	k.runAll("quota", 2)
	note := k.eventSaying("quota", operator.ReasonRoomProbesRefused, "could not ask the scheduler for room for 1 more worker(s)")
	if !strings.Contains(note, "exceeded quota") || !strings.HasSuffix(note, "asking again in 1m0s") {
		k.t.Errorf("RoomProbesRefused event %q; want the quota named and the retry in 1m0s", note)
	}
	k.t.Logf("event RoomProbesRefused: %s", note)
	if n := len(k.probes()); n != 0 {
		k.t.Errorf("%d room probes; want none (refused)", n)
	}
	k.waitStatus("quota", "running with 2", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseRunning && st.Workers == 2 })
}

// probes are the room probes in the test's namespace.
func (k *cluster) probes() []corev1.Pod {
	var l corev1.PodList
	if err := k.c.List(context.Background(), &l, client.InNamespace(k.ns), client.HasLabels{operator.LabelRoomProbe}); err != nil {
		k.t.Fatal(err)
	}
	return l.Items
}

// bindProbes waits for n room probes of the TrainJob name, checks each with check (nil:
// none), and binds them to node. A round of probes deleted before the test bound them all
// (its settle time ran out on a loaded machine) is waited past: the next round is bound.
func (k *cluster) bindProbes(name string, n int, node string, check func(corev1.Pod)) {
	k.t.Helper()
	for round := 1; ; round++ {
		probes, gone := k.waitProbes(name, n), false
		for _, p := range probes {
			if check != nil {
				check(p)
			}
			err := k.c.SubResource("binding").Create(context.Background(), &p, &corev1.Binding{
				Target: corev1.ObjectReference{Kind: "Node", Name: node}})
			if apierrors.IsNotFound(err) && round < 3 {
				gone = true
				break
			}
			if err != nil {
				k.t.Fatal(err)
			}
		}
		if !gone {
			return
		}
		k.eventuallyWithin(2*time.Minute, "the round of probes gone", func() (bool, string) {
			return len(k.probes()) == 0, fmt.Sprintf("%d probes left", len(k.probes()))
		})
	}
}

// waitProbes waits for the room probes of the TrainJob name to number n and returns them.
// It waits past a round of probes that none placed within the settle time (30 s), which
// are deleted, and the next round, a minute later: a slow API server (a loaded machine)
// may let the test look only once the first round is gone.
func (k *cluster) waitProbes(name string, n int) []corev1.Pod {
	k.t.Helper()
	var probes []corev1.Pod
	k.eventuallyWithin(2*time.Minute, fmt.Sprintf("%d room probes", n), func() (bool, string) {
		probes = k.probes()
		st := k.get(name).Status
		return len(probes) == n, fmt.Sprintf("%d probes; status phase %s, workers %d, reason %q", len(probes), st.Phase, st.Workers, st.Reason)
	})
	return probes
}

// With Kueue, the quota a shrunk gang no longer uses goes back through the Workload's
// status.reclaimablePods: admitted with 4 of 2:4, one worker unschedulable → 3 workers,
// and 1 reclaimable.
func testKueueElasticShrink(k *cluster) {
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"}}}
	_ = k.c.Create(context.Background(), flavor)
	k.newJob("kshrink", 4, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.QueueName = "team-a"
		j.Spec.MinWorkers = ptr(int32(2))
	})
	k.theWorkload()
	admission := map[string]any{"clusterQueue": "gpus", "podSetAssignments": []any{map[string]any{
		"name": "workers", "count": int64(4), "flavors": map[string]any{"cpu": "default"}}}}
	k.kueueSets(admission, wlCond("QuotaReserved", metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpus"),
		wlCond("Admitted", metav1.ConditionTrue, "Admitted", "The workload is admitted"))
	pods := k.runAll("kshrink", 1)
	k.waitStatus("kshrink", "running", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseRunning })
	k.setPod(pods[3], unschedulableSince(time.Minute))
	k.waitStatus("kshrink", "attempt 2 with 3 workers", func(st *v1.TrainJobStatus) bool { return st.Attempt == 2 && st.Workers == 3 })
	k.eventually("reclaimablePods workers 1", func() (bool, string) {
		rp, _, _ := unstructured.NestedSlice(k.theWorkload().Object, "status", "reclaimablePods")
		if len(rp) != 1 {
			return false, "none"
		}
		m := rp[0].(map[string]any)
		return m["name"] == "workers" && m["count"] == int64(1), "got " + strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(jsonOf(rp), "\n", ""), " ", ""))
	})
	if note := k.event("kshrink", "QuotaReclaimed"); !strings.Contains(note, "gave 1 of the 4 admitted workers' quota back") {
		k.t.Errorf("QuotaReclaimed event %q", note)
	}
	k.gone("kshrink", 1)
	if n := len(k.attempt("kshrink", 2)); n != 3 {
		k.t.Fatalf("attempt 2 has %d pods; want 3", n)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// An elastic 2:4 gang whose workers 2 and 3 run on a node that is lost: the operator
// replaces them, their replacements stay unschedulable, and the gang shrinks to 2 and
// records the node in status.lostNodes. The gang grows back from what the status says,
// not from the operator's memory (which a restarted operator has lost): once the node is
// ready again (resizeIntervalSeconds 0: at once) it restarts with 4 workers, and
// status.lostNodes empties when all 4 run.
func testElasticLostNode(k *cluster) {
	node := k.lostNodeShrink("regrow")
	k.setNodeReady(node, true)
	got := k.waitStatus("regrow", "grown to 4", func(st *v1.TrainJobStatus) bool { return st.Attempt == 3 && st.Workers == 0 })
	k.eventSaying("regrow", operator.ReasonResized, "resized from 2 to 4 workers: node "+node.Name+" is ready again")
	if got.Status.Restarts != 0 {
		k.t.Errorf("status %+v; want the resizes to use no restart", got.Status)
	}
	k.runAll("regrow", 3)
	k.waitStatus("regrow", "running with 4, no lost node", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.WorkersReady == 4 && len(st.LostNodes) == 0
	})
}

// A gang shrunk for a lost node that never comes back (a spot node gone for good) grows
// when its room probes find room on another node, and forgets the lost node.
func testElasticLostNodeGoneForGood(k *cluster) {
	k.lostNodeShrink("gone")
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.ns + "-new"}}
	if err := k.c.Create(context.Background(), other); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = k.c.Delete(context.Background(), other) })
	k.bindProbes("gone", 2, other.Name, nil)
	k.waitStatus("gone", "grown to 4", func(st *v1.TrainJobStatus) bool { return st.Attempt == 3 && st.Workers == 0 })
	k.eventSaying("gone", operator.ReasonResized, "resized from 2 to 4 workers: room for 2 more worker(s): room probes placed on "+other.Name)
	k.runAll("gone", 3)
	k.waitStatus("gone", "running with 4, no lost node", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.WorkersReady == 4 && len(st.LostNodes) == 0
	})
}

// lostNodeShrink runs the elastic 2:4 TrainJob name (resizeIntervalSeconds 0: a grow comes
// at once) with workers 2 and 3 bound to a node that is not Ready: the operator replaces
// them, the replacements stay unschedulable, and the gang shrinks to 2 with the node in
// status.lostNodes. It returns once attempt 2's two workers run, and returns the node.
func (k *cluster) lostNodeShrink(name string) *corev1.Node {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.ns + "-b"}}
	if err := k.c.Create(ctx, node); err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { _ = k.c.Delete(context.Background(), node) })
	k.setNodeReady(node, false)
	k.newJob(name, 4, func(j *v1.TrainJob) {
		j.Spec.MinWorkers, j.Spec.ResizeIntervalSeconds = ptr(int32(2)), ptr(int64(0))
	})
	pods := k.attempt(name, 1)
	for _, p := range pods[2:] {
		if err := k.c.SubResource("binding").Create(ctx, p, &corev1.Binding{
			Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}); err != nil {
			k.t.Fatal(err)
		}
	}
	for _, p := range pods[:2] {
		k.setPod(p, running) // 2 and 3 are lost already: their node is not ready
	}
	var repl []*corev1.Pod
	k.eventually("workers 2 and 3 replaced", func() (bool, string) {
		now := k.attempt(name, 1)
		repl = now[2:]
		return repl[0].UID != pods[2].UID && repl[1].UID != pods[3].UID, "not yet"
	})
	k.setPod(repl[0], unschedulableSince(28*time.Second)) // both, once the second is
	k.setPod(repl[1], unschedulableSince(time.Minute))
	got := k.waitStatus(name, "shrunk to 2", func(st *v1.TrainJobStatus) bool { return st.Attempt == 2 && st.Workers == 2 })
	if !slices.Equal(got.Status.LostNodes, []string{node.Name}) {
		k.t.Errorf("status.lostNodes %q; want [%s]", got.Status.LostNodes, node.Name)
	}
	k.eventSaying(name, operator.ReasonResized, "resized from 4 to 2 workers: node "+node.Name+" lost")
	k.runAll(name, 2)
	return node
}

// setNodeReady sets node's Ready condition as its kubelet (or the node controller) would.
func (k *cluster) setNodeReady(node *corev1.Node, ready bool) {
	k.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	var cur corev1.Node
	if err := k.c.Get(context.Background(), client.ObjectKeyFromObject(node), &cur); err != nil {
		k.t.Fatal(err)
	}
	cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(),
		LastTransitionTime: metav1.Now(), Reason: "Test"}}
	if err := k.c.Status().Update(context.Background(), &cur); err != nil {
		k.t.Fatal(err)
	}
}

// deref is *p, or "nil".
func deref[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}
