package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/workload"
)

// slice returns a getter that waits for the namespace's Workload slice number n (its
// trainyard.dev/workload-slice annotation) and returns it.
func (k *cluster) slice(n int) func() *unstructured.Unstructured {
	return func() *unstructured.Unstructured {
		k.t.Helper()
		var wl *unstructured.Unstructured
		k.eventually(fmt.Sprintf("Workload slice %d", n), func() (bool, string) {
			var names []string
			for _, w := range k.workloads() {
				names = append(names, w.GetName())
				if w.GetAnnotations()["trainyard.dev/workload-slice"] == fmt.Sprint(n) {
					wl = &w
					return true, ""
				}
			}
			return false, strings.Join(names, " ")
		})
		return wl
	}
}

// admitted is Kueue's admission of count workers of the flavor default.
func admitted(count int64) map[string]any {
	return map[string]any{"clusterQueue": "gpus", "podSetAssignments": []any{map[string]any{
		"name": "workers", "count": count, "flavors": map[string]any{"cpu": "default"}}}}
}

// slicedGang runs the elastic 2:4 TrainJob name in a Kueue queue with Kueue's annotation
// for workload slices, worker 0's progress served by progress: Kueue admits 2 of its 4
// workers, and the pod set keeps every index, 2 and 3 dropped from the start. It returns
// once the running gang has asked for more through a second slice (count 4, minCount 3,
// replacing the first), with getters of both slices.
func (k *cluster) slicedGang(name string, progress *progressServer) (first, second func() *unstructured.Unstructured) {
	t, ctx := k.t, context.Background()
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"}}}
	_ = k.c.Create(ctx, flavor)
	k.newJob(name, 4, func(j *v1.TrainJob) {
		j.Annotations = map[string]string{"kueue.x-k8s.io/elastic-job": "true"}
		j.Spec.Kubernetes.QueueName, j.Spec.MinWorkers = "team-a", ptr(int32(2))
	})
	first = k.slice(1)
	if wl := first(); wl.GetAnnotations()["kueue.x-k8s.io/elastic-job"] != "true" {
		t.Fatalf("the first Workload's annotations %v; want kueue.x-k8s.io/elastic-job true", wl.GetAnnotations())
	}
	k.kueueSetsOn(first, admitted(2), reserved, admit)
	pods := k.attempt(name, 1)
	if len(pods) != 2 {
		t.Fatalf("%d pods; want the 2 Kueue admitted", len(pods))
	}
	for _, p := range pods {
		if env := envOf(p, workload.EnvDroppedWorkers); env != "2,3" {
			t.Errorf("pod %s has %s=%q; want 2,3 (a pod set of every index)", p.Name, workload.EnvDroppedWorkers, env)
		}
	}
	k.servePods(pods, progress)
	k.keyProgress(name, progress)
	k.waitStatus(name, "running with 2", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.Workers == 2 && slices.Equal(st.DroppedWorkers, []int32{2, 3})
	})
	second = k.slice(2)
	wl := second()
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	set := sets[0].(map[string]any)
	if want := k.ns + "/" + first().GetName(); wl.GetAnnotations()["kueue.x-k8s.io/workload-slice-replacement-for"] != want ||
		set["count"] != int64(4) || set["minCount"] != int64(3) {
		t.Fatalf("second slice: annotations %v, count %v, minCount %v; want it to replace %s, count 4, minCount 3",
			wl.GetAnnotations(), set["count"], set["minCount"], want)
	}
	k.eventSaying(name, "WorkloadSliceCreated", "the gang runs with 2 of 4 workers: asked Kueue for more through Workload slice "+wl.GetName())
	return first, second
}

// Kueue's conditions of an admission.
var (
	reserved = wlCond("QuotaReserved", metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue gpus")
	admit    = wlCond("Admitted", metav1.ConditionTrue, "Admitted", "The workload is admitted")
)

// A Kueue without its ElasticJobsViaWorkloadSlices feature gate admits the second slice
// beside the first (when the quota has room for both) rather than in its place: the
// operator finishes the first as Kueue would, saying why, and the gang grows. Taking the
// annotation off then leaves the gang on its current slice.
func testKueueSliceBeside(k *cluster) {
	t := k.t
	progress := startProgressServer(t)
	first, second := k.slicedGang("beside", progress)
	k.kueueSetsOn(second, admitted(4), reserved, admit)
	k.eventually("the first slice finished", func() (bool, string) {
		c := findCond(wlConds(first()), "Finished")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "WorkloadSliceReplaced" &&
			strings.Contains(c.Message, "ElasticJobsViaWorkloadSlices feature gate"), fmt.Sprint(c)
	})
	k.eventSaying("beside", operator.ReasonResized, "resized from 2 to 4 workers: Kueue admitted 4 workers through Workload slice "+second().GetName())
	k.waitStatus("beside", "4 workers, none dropped", func(st *v1.TrainJobStatus) bool {
		return st.Workers == 0 && len(st.DroppedWorkers) == 0
	})

	// The annotation taken off: the job goes on with its current slice, not its first,
	// finished one.
	for range 10 {
		j := k.get("beside")
		delete(j.Annotations, "kueue.x-k8s.io/elastic-job")
		if err := k.c.Update(context.Background(), j); !apierrors.IsConflict(err) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	time.Sleep(2 * time.Second)
	if st := k.get("beside").Status; st.Disruptions != 0 || st.Workers != 0 || len(k.pods("beside", 1)) != 4 {
		t.Errorf("after the annotation was taken off: %+v, %d pods; want the gang untouched on its 4 pods", st, len(k.pods("beside", 1)))
	}

	// Someone else in the namespace makes a Workload labelled with the job's UID, pending,
	// that the TrainJob does not control: the operator neither takes it as a slice nor
	// deletes it.
	j := k.get("beside")
	j.Annotations = map[string]string{"kueue.x-k8s.io/elastic-job": "true"}
	if err := k.c.Update(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	foreign := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "not-the-jobs", "namespace": k.ns,
			"labels":      map[string]any{workload.LabelJobUID: string(j.UID)},
			"annotations": map[string]any{"trainyard.dev/workload-slice": "9"}},
		"spec": map[string]any{"queueName": "team-a", "podSets": []any{map[string]any{"name": "workers", "count": int64(1),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}}}}}}}}
	if err := k.c.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if st := k.get("beside").Status; st.Disruptions != 0 || st.Workers != 0 || len(k.pods("beside", 1)) != 4 {
		t.Errorf("beside a foreign Workload: %+v, %d pods; want the gang untouched on its 4 pods", st, len(k.pods("beside", 1)))
	}
	var still unstructured.Unstructured
	still.SetGroupVersionKind(foreign.GroupVersionKind())
	if err := k.c.Get(context.Background(), client.ObjectKeyFromObject(foreign), &still); err != nil || findCond(wlConds(&still), "Finished") != nil {
		t.Errorf("the foreign Workload: %v, %v; want it there, untouched", err, still.Object["status"])
	}
}

// An elastic 2:4 gang in a Kueue queue, with Kueue's annotation for workload slices,
// grows while it runs: Kueue admits 2 of its 4 workers, and the pod set keeps every index,
// 2 and 3 dropped from the start. Running, the gang asks for more through a second slice
// (count 4, minCount 3, replacing the first). Kueue finishes the first slice and, a moment
// later, admits the second with 4: the gang keeps running through that handover, then
// worker 0 readmits workers 2 and 3 in place, their pods are made in the running pod set,
// nothing is given back, and the slice is marked grown. When Kueue evicts the second
// slice, it is finished and a fresh one asks for as few as spec.minWorkers again.
func testKueueSliceGrow(k *cluster) {
	t := k.t
	progress := startProgressServer(t)
	first, second := k.slicedGang("sliced", progress)
	wl := second()

	// Kueue's handover: the first slice finished, the second not admitted yet.
	k.kueueSetsOn(first, nil, wlCond("Finished", metav1.ConditionTrue, "WorkloadSliceReplaced", "Replaced to accommodate a workload"),
		wlCond("QuotaReserved", metav1.ConditionFalse, "Finished", "Workload has finished"))
	time.Sleep(2 * time.Second)
	if st := k.get("sliced").Status; st.Phase != v1.PhaseRunning || len(k.pods("sliced", 1)) != 2 || st.Disruptions != 0 {
		t.Fatalf("during the handover: %+v, %d pods; want the gang running on, untouched", st, len(k.pods("sliced", 1)))
	}
	k.kueueSetsOn(second, admitted(4), reserved, admit)
	note := k.eventSaying("sliced", operator.ReasonResized, "resized from 2 to 4 workers: Kueue admitted 4 workers through Workload slice "+wl.GetName())
	if !strings.Contains(note, "workers 2, 3 get new pods in attempt 1's pod set") {
		t.Errorf("Resized event %q; want the grow in place", note)
	}
	k.waitStatus("sliced", "4 workers, none dropped", func(st *v1.TrainJobStatus) bool {
		return st.Workers == 0 && len(st.DroppedWorkers) == 0
	})
	if r := progress.takenReadmits(); !allFor(r, []int{2, 3}) {
		t.Errorf("readmit requests worker 0 took: %+v; want them for workers 2 and 3", r)
	}
	k.eventually("the readmitted workers' pods and the slice marked grown", func() (bool, string) {
		wl := second()
		rp, _, _ := unstructured.NestedSlice(wl.Object, "status", "reclaimablePods")
		n := len(k.pods("sliced", 1))
		return n == 4 && wl.GetAnnotations()["trainyard.dev/slice-grown"] == "true" && len(rp) == 0,
			fmt.Sprintf("%d pods, annotations %v, reclaimablePods %v", n, wl.GetAnnotations(), rp)
	})
	if n := len(k.workloads()); n != 2 {
		t.Errorf("%d Workloads; want the 2 slices, no third (the gang has its full size)", n)
	}

	// Kueue evicts the second slice: the gang stops, and a fresh slice asks for 2 to 4.
	k.kueueSetsOn(second, admitted(4), wlCond("Evicted", metav1.ConditionTrue, "Preempted", "Preempted to accommodate a higher priority workload"))
	for _, p := range k.pods("sliced", 1) { // the operator may be deleting them already
		if err := k.trySetPod(&p, exited(143, "")); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	k.waitStatus("sliced", "a disruption", func(st *v1.TrainJobStatus) bool { return st.Disruptions == 1 })
	k.eventually("the second slice finished", func() (bool, string) {
		c := findCond(wlConds(second()), "Finished")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprint(c)
	})
	third := k.slice(3)()
	sets, _, _ := unstructured.NestedSlice(third.Object, "spec", "podSets")
	if set := sets[0].(map[string]any); third.GetAnnotations()["kueue.x-k8s.io/workload-slice-replacement-for"] != "" || set["minCount"] != int64(2) {
		t.Errorf("third slice: annotations %v, minCount %v; want a fresh one for as few as 2", third.GetAnnotations(), set["minCount"])
	}
}

// findCond is the condition of type kind in conds, or nil.
func findCond(conds []metav1.Condition, kind string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == kind {
			return &conds[i]
		}
	}
	return nil
}
