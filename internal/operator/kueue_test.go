package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// workloads lists the Kueue Workloads of the test's namespace.
func (k *cluster) workloads() []unstructured.Unstructured {
	k.t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	l.SetKind("WorkloadList")
	if err := k.c.List(context.Background(), l, client.InNamespace(k.ns)); err != nil {
		k.t.Fatal(err)
	}
	return l.Items
}

// theWorkload waits for the namespace's one Workload and returns it.
func (k *cluster) theWorkload() *unstructured.Unstructured {
	k.t.Helper()
	var wl *unstructured.Unstructured
	k.eventually("one Workload", func() (bool, string) {
		l := k.workloads()
		if len(l) != 1 {
			return false, fmt.Sprintf("%d Workloads", len(l))
		}
		wl = &l[0]
		return true, ""
	})
	return wl
}

func wlConds(wl *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	var out []metav1.Condition
	for _, r := range raw {
		var c metav1.Condition
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(r.(map[string]any), &c)
		out = append(out, c)
	}
	return out
}

// kueueSets changes the Workload's status as Kueue would: conditions set (or replaced),
// and the admission set, or removed when nil.
func (k *cluster) kueueSets(admission map[string]any, conds ...metav1.Condition) {
	k.t.Helper()
	k.kueueSetsOn(k.theWorkload, admission, conds...)
}

// kueueSetsOn is kueueSets on the Workload get returns.
func (k *cluster) kueueSetsOn(get func() *unstructured.Unstructured, admission map[string]any, conds ...metav1.Condition) {
	k.t.Helper()
	for range 10 {
		wl := get()
		cs := wlConds(wl)
		for _, c := range conds {
			c.LastTransitionTime = metav1.Now()
			meta.SetStatusCondition(&cs, c)
		}
		var raw []any
		for i := range cs {
			m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&cs[i])
			raw = append(raw, m)
		}
		_ = unstructured.SetNestedSlice(wl.Object, raw, "status", "conditions")
		if admission != nil {
			_ = unstructured.SetNestedMap(wl.Object, admission, "status", "admission")
		} else {
			unstructured.RemoveNestedField(wl.Object, "status", "admission")
		}
		err := k.c.Status().Update(context.Background(), wl)
		if !apierrors.IsConflict(err) {
			if err != nil {
				k.t.Fatal(err)
			}
			return
		}
	}
	k.t.Fatal("workload status: too many conflicts")
}

func wlCond(kind string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: kind, Status: status, Reason: reason, Message: msg}
}

// The operator does for a TrainJob in a Kueue queue what Kueue's jobframework does for the
// kinds it knows (Kueue here is the test, setting the Workload's status as Kueue would):
// one Workload per TrainJob, nothing made until it is admitted, the flavor's placement in
// the pods, a restart that keeps the admission, a preemption that is a disruption and gives
// the reservation back, and a finished job that finishes its Workload.
func testKueue(k *cluster) {
	ctx := context.Background()
	pc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
		"metadata": map[string]any{"name": "team-high"}, "value": int64(1000)}}
	if err := k.c.Create(ctx, pc); err != nil {
		k.t.Fatal(err)
	}
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "h100"},
		"spec": map[string]any{"nodeLabels": map[string]any{"pool": "h100"},
			"tolerations": []any{map[string]any{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}}},
	}}
	if err := k.c.Create(ctx, flavor); err != nil {
		k.t.Fatal(err)
	}
	k.newJob("queued", 4, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.QueueName = "team-a"
		j.Spec.Kubernetes.PriorityClassName = "team-high"
		j.Spec.MaxRestarts = 1
	})
	wl := k.theWorkload()
	if !metav1.IsControlledBy(wl, k.get("queued")) {
		k.t.Errorf("the Workload must be controlled by its TrainJob: %v", wl.GetOwnerReferences())
	}
	if note := k.event("queued", "WorkloadCreated"); note != fmt.Sprintf("created Kueue Workload %s for 4 workers in LocalQueue \"team-a\"", wl.GetName()) {
		k.t.Errorf("WorkloadCreated event %q", note)
	}
	q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
	prio, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority")
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	if q != "team-a" || prio != 1000 || len(sets) != 1 {
		k.t.Fatalf("workload spec %v; want LocalQueue team-a, priority 1000, one PodSet", wl.Object["spec"])
	}
	set := sets[0].(map[string]any)
	if set["name"] != "workers" || set["count"] != int64(4) {
		k.t.Errorf("pod set %s of %v; want workers of 4", set["name"], set["count"])
	}

	// Kueue has no room: the gang waits with Kueue's reason, and nothing is made.
	k.kueueSets(nil, wlCond("QuotaReserved", metav1.ConditionFalse, "Pending",
		"couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor h100, 4 more needed"))
	got := k.waitStatus("queued", "queued with Kueue's reason", func(st *v1.TrainJobStatus) bool {
		c := cond(st, v1.CondRunning)
		return c != nil && c.Reason == v1.ReasonQueued && strings.Contains(c.Message, "insufficient quota")
	})
	if want := "waiting: Kueue admitted 0 of 4 workers (couldn't assign flavors"; !strings.Contains(got.Status.Reason, want) {
		k.t.Errorf("reason %q; want it to start %q", got.Status.Reason, want)
	}
	if len(k.pods("queued", 1)) != 0 || got.Status.AttemptStartTime != nil {
		k.t.Fatal("nothing of the gang may exist before Kueue admits it")
	}

	// Kueue admits it on the h100 flavor: the gang is made, with the flavor's placement.
	admission := map[string]any{"clusterQueue": "gpus", "podSetAssignments": []any{map[string]any{
		"name": "workers", "count": int64(4), "flavors": map[string]any{"nvidia.com/gpu": "h100", "cpu": "h100"}}}}
	admit := func() {
		k.kueueSets(admission, wlCond("QuotaReserved", metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpus"),
			wlCond("Admitted", metav1.ConditionTrue, "Admitted", "The workload is admitted"),
			wlCond("Evicted", metav1.ConditionFalse, "QuotaReserved", "Previously: evicted"))
	}
	admit()
	first := k.attempt("queued", 1)
	pod := first[3].Spec
	if first[3].Labels[workload.LabelQueue] != "" {
		k.t.Errorf("an admitted gang's pods are not queued themselves: labels %v", first[3].Labels)
	}
	spot := slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Key == "spot" })
	if pod.NodeSelector["pool"] != "h100" || !spot {
		k.t.Errorf("the workers must get the flavor's placement: nodeSelector %v tolerations %v", pod.NodeSelector, pod.Tolerations)
	}
	pods := k.runAll("queued", 1)
	k.waitStatus("queued", "running after admission", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.WorkersReady == 4 && st.AttemptStartTime != nil
	})
	var rv string
	k.eventually("PodsReady on the Workload", func() (bool, string) { // for Kueue's waitForPodsReady
		wl := k.theWorkload()
		rv = wl.GetResourceVersion()
		return meta.IsStatusConditionTrue(wlConds(wl), "PodsReady"), fmt.Sprintf("%v", wl.Object["status"])
	})

	// A worker fails: the gang restarts on new pods and keeps its admission.
	k.setPod(pods[2], exited(1, ""))
	k.runAll("queued", 2)
	k.waitStatus("queued", "running attempt 2", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 2 && st.Phase == v1.PhaseRunning
	})
	if wl := k.theWorkload(); wl.GetResourceVersion() != rv {
		k.t.Errorf("a restart must not touch the Workload: %v", wl.Object["status"])
	}

	// Kueue preempts it: a disruption (maxRestarts is used up), the pods go, and the
	// reservation is given back so that Kueue queues the Workload again.
	k.kueueSets(admission, wlCond("Evicted", metav1.ConditionTrue, "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"))
	for _, p := range k.pods("queued", 2) { // the operator may be deleting them already
		if err := k.trySetPod(&p, exited(143, "")); err != nil && !apierrors.IsNotFound(err) {
			k.t.Fatal(err)
		}
	}
	got = k.waitStatus("queued", "requeued after preemption", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 3 && st.Disruptions == 1 && st.Phase != v1.PhaseFailed
	})
	if c := cond(&got.Status, v1.CondRestarting); c == nil || !strings.Contains(c.Message, "Kueue evicted the gang (Preempted") {
		k.t.Errorf("restarting condition %+v; want it to name Kueue's preemption", c)
	}
	k.gone("queued", 2)
	k.eventually("the reservation given back", func() (bool, string) {
		wl := k.theWorkload()
		cs := wlConds(wl)
		_, admitted, _ := unstructured.NestedMap(wl.Object, "status", "admission")
		return meta.IsStatusConditionFalse(cs, "QuotaReserved") && meta.IsStatusConditionFalse(cs, "Admitted") &&
			meta.IsStatusConditionTrue(cs, "Requeued") && !admitted, fmt.Sprintf("%v", wl.Object["status"])
	})
	k.waitStatus("queued", "queued again", func(st *v1.TrainJobStatus) bool {
		return hasCond(st, v1.CondRunning, metav1.ConditionFalse, v1.ReasonQueued)
	})
	if len(k.pods("queued", 3)) != 0 {
		k.t.Fatal("attempt 3 must wait for Kueue")
	}

	// Readmitted: attempt 3 runs and succeeds; the Workload is finished, freeing the quota.
	admit()
	for _, p := range k.runAll("queued", 3) {
		k.setPod(p, exited(0, ""))
	}
	k.waitStatus("queued", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
	k.eventually("the Workload finished", func() (bool, string) {
		wl := k.theWorkload()
		cs := wlConds(wl)
		return meta.IsStatusConditionTrue(cs, "Finished") && meta.IsStatusConditionFalse(cs, "QuotaReserved"), fmt.Sprintf("%v", wl.Object["status"])
	})
	if n := len(k.workloads()); n != 1 {
		k.t.Errorf("%d Workloads; want one for the TrainJob's whole life", n)
	}
}

// A TrainJob queued by Kueue's label and suspended by its user: its Workload is
// deactivated (Kueue evicts it), the reservation given back once the pods are gone, and
// activated again on resume, when the gang waits for Kueue to admit it again.
func testKueueSuspend(k *cluster) {
	j := &v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled", Namespace: k.ns, Labels: map[string]string{workload.LabelQueue: "team-b"}},
		Spec: v1.TrainJobSpec{Workers: ptr(int32(2)), Command: []string{"python3", "train.py"},
			Kubernetes: &v1.KubernetesSpec{Image: "pytorch/pytorch:2.5.1"}},
	}
	if err := k.c.Create(context.Background(), j); err != nil {
		k.t.Fatal(err)
	}
	wl := k.theWorkload()
	if q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName"); q != "team-b" {
		k.t.Fatalf("the Workload's queue is %q; want the TrainJob's label's, team-b", q)
	}
	admission := map[string]any{"clusterQueue": "gpus", "podSetAssignments": []any{map[string]any{"name": "workers", "count": int64(2)}}}
	k.kueueSets(admission, wlCond("QuotaReserved", metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpus"),
		wlCond("Admitted", metav1.ConditionTrue, "Admitted", "The workload is admitted"))
	k.runAll("labelled", 1)

	k.patchSpec("labelled", func(s *v1.TrainJobSpec) { s.Suspend = true })
	k.eventually("the Workload deactivated", func() (bool, string) {
		active, found, _ := unstructured.NestedBool(k.theWorkload().Object, "spec", "active")
		return found && !active, fmt.Sprintf("active %v (set: %v)", active, found)
	})
	k.kueueSets(admission, wlCond("Evicted", metav1.ConditionTrue, "Deactivated", "The workload is deactivated"))
	k.gone("labelled", 1)
	k.eventually("the reservation given back", func() (bool, string) {
		wl := k.theWorkload()
		return meta.IsStatusConditionFalse(wlConds(wl), "QuotaReserved"), fmt.Sprintf("%v", wl.Object["status"])
	})
	k.waitStatus("labelled", "suspended", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSuspended })

	k.patchSpec("labelled", func(s *v1.TrainJobSpec) { s.Suspend = false })
	k.eventually("the Workload active again", func() (bool, string) {
		active, _, _ := unstructured.NestedBool(k.theWorkload().Object, "spec", "active")
		return active, "inactive"
	})
	k.waitStatus("labelled", "queued after resuming", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 2 && hasCond(st, v1.CondRunning, metav1.ConditionFalse, v1.ReasonQueued)
	})
	if len(k.pods("labelled", 2)) != 0 {
		k.t.Fatal("the resumed gang must wait for Kueue")
	}
	k.kueueSets(admission, wlCond("QuotaReserved", metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpus"),
		wlCond("Admitted", metav1.ConditionTrue, "Admitted", "The workload is admitted"),
		wlCond("Evicted", metav1.ConditionFalse, "QuotaReserved", "Previously: deactivated"))
	k.runAll("labelled", 2)

	// An administrator (or Kueue) deactivates the Workload: the gang stops, a disruption,
	// and waits; the operator does not activate it again.
	wl = k.theWorkload()
	_ = unstructured.SetNestedField(wl.Object, false, "spec", "active")
	if err := k.c.Update(context.Background(), wl); err != nil {
		k.t.Fatal(err)
	}
	k.kueueSets(admission, wlCond("Evicted", metav1.ConditionTrue, "Deactivated", "The workload is deactivated"))
	got := k.waitStatus("labelled", "waiting while deactivated", func(st *v1.TrainJobStatus) bool {
		return st.Attempt == 3 && st.Disruptions == 1 && strings.Contains(st.Reason, "is deactivated")
	})
	if active, _, _ := unstructured.NestedBool(k.theWorkload().Object, "spec", "active"); active {
		k.t.Errorf("the operator activated a Workload it did not deactivate; status %+v", got.Status)
	}
}

// An elastic gang (spec.minWorkers) in a Kueue queue asks Kueue for as few as minWorkers
// (the PodSet's minCount, for Kueue's partial admission) and runs with as many workers as
// Kueue admits: that many pods, each told the gang's size, and the status says so.
func testKueueElastic(k *cluster) {
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"}}}
	if err := k.c.Create(context.Background(), flavor); err != nil && !apierrors.IsAlreadyExists(err) {
		k.t.Fatal(err)
	}
	k.newJob("elastic", 4, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.QueueName = "team-a"
		j.Spec.MinWorkers = ptr(int32(2))
	})
	sets, _, _ := unstructured.NestedSlice(k.theWorkload().Object, "spec", "podSets")
	if set := sets[0].(map[string]any); set["count"] != int64(4) || set["minCount"] != int64(2) {
		k.t.Fatalf("pod set count %v, minCount %v; want 4 and 2", set["count"], set["minCount"])
	}

	// Kueue's quota has room for 3.
	admission := map[string]any{"clusterQueue": "gpus", "podSetAssignments": []any{map[string]any{
		"name": "workers", "count": int64(3), "flavors": map[string]any{"cpu": "default"}}}}
	k.kueueSets(admission, wlCond("QuotaReserved", metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpus"),
		wlCond("Admitted", metav1.ConditionTrue, "Admitted", "The workload is admitted"))
	pods := k.attempt("elastic", 1)
	if n := len(k.pods("elastic", 1)); n != 3 {
		k.t.Fatalf("%d pods; want the 3 Kueue admitted", n)
	}
	for _, p := range pods {
		var job v1.TrainJob
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == workload.EnvJob {
				_ = json.Unmarshal([]byte(e.Value), &job)
			}
		}
		if job.Spec.WorkerCount() != 3 || job.Spec.MinWorkers != nil {
			k.t.Errorf("pod %s: the workers' spec says %d workers (min %v); want 3, not elastic", p.Name, job.Spec.WorkerCount(), job.Spec.MinWorkers)
		}
	}
	k.runAll("elastic", 1)
	k.waitStatus("elastic", "running with 3", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.WorkersReady == 3 && st.Workers == 3
	})
	for _, p := range k.pods("elastic", 1) {
		k.setPod(&p, exited(0, ""))
	}
	got := k.waitStatus("elastic", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
	if !strings.Contains(got.Status.Reason, "all 3 workers succeeded") {
		k.t.Errorf("reason %q; want all 3 workers", got.Status.Reason)
	}
}
