package operator_test

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
// and says so; the pods' job says 2 workers, their environment the gang's bounds.
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
	k.gone("shrink", 1)
	for _, p := range k.attempt("shrink", 2) {
		env := podEnv(p)
		var job v1.TrainJob
		_ = json.Unmarshal([]byte(env[workload.EnvJob]), &job)
		if job.Spec.WorkerCount() != 2 || env[workload.EnvMinWorkers] != "2" || env[workload.EnvMaxWorkers] != "4" {
			k.t.Errorf("pod %s: job of %d workers, %s=%q, %s=%q; want 2 workers, bounds 2 and 4", p.Name, job.Spec.WorkerCount(),
				workload.EnvMinWorkers, env[workload.EnvMinWorkers], workload.EnvMaxWorkers, env[workload.EnvMaxWorkers])
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
