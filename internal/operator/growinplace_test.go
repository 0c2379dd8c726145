package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/workload"
)

// serveReadmit plays worker 0's readmit endpoint: a request that verifies under p.secret
// as a readmit is taken (200, and its workers are no longer dropped in the summary
// served), anything else refused (403). p.mu is held.
func (p *progressServer) serveReadmit(w http.ResponseWriter, r *http.Request) {
	p.serveGang(w, r, workload.OpenReadmit, func(req workload.DropRequest) workload.DropReply {
		p.readmits = append(p.readmits, req)
		running := 4 - len(p.sum.Dropped)
		p.sum.Dropped = slices.DeleteFunc(slices.Clone(p.sum.Dropped), func(w int) bool { return slices.Contains(req.Workers, w) })
		return workload.DropReply{Dropped: p.sum.Dropped, Workers: running, Attempt: p.sum.Attempt}
	})
}

// allFor reports whether reqs are one request or more, each for workers. A reconcile whose
// status write conflicts (it read the TrainJob stale) asks worker 0 again, which takes a
// repeated request as the first (gang.Coordinator.Drop, Readmit).
func allFor(reqs []workload.DropRequest, workers []int) bool {
	return len(reqs) > 0 && !slices.ContainsFunc(reqs, func(r workload.DropRequest) bool { return !slices.Equal(r.Workers, workers) })
}

// takenReadmits are the readmit requests p took.
func (p *progressServer) takenReadmits() []workload.DropRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.readmits)
}

// An elastic 2:4 gang that shrank in place grows back in place once room probes are
// placed, without waiting for its (long) resize interval: the operator sends worker 0 a
// signed readmit request for workers 2 and 3, records the gang's size, makes their pods in
// attempt 1's pod set (no new attempt's Service or pods) and keeps the job Running while
// they start; worker 0's progress then says attempt 3 runs with four workers, and the job
// succeeds with them, having used the loss's restart only.
func testElasticGrowInPlace(k *cluster) {
	t, ctx := k.t, context.Background()
	progress := startProgressServer(t)
	k.newJob("growin", 4, func(j *v1.TrainJob) {
		j.Spec.MinWorkers, j.Spec.ResizeIntervalSeconds = ptr(int32(2)), ptr(int64(3600))
	})
	pods := k.servePods(k.attempt("growin", 1), progress)
	k.keyProgress("growin", progress)
	k.waitStatus("growin", "running", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseRunning })
	progress.set(workload.Summary{Outcome: workload.OutcomeRestarting, Attempt: 2, Reason: "worker 2 was lost", Restarts: 1, Disruptions: 1})
	k.setPod(pods[2], unschedulableSince(time.Minute))
	k.setPod(pods[3], unschedulableSince(time.Minute))
	k.waitStatus("growin", "shrunk in place to 2", func(st *v1.TrainJobStatus) bool {
		return st.Workers == 2 && slices.Equal(st.DroppedWorkers, []int32{2, 3})
	})
	progress.set(workload.Summary{Outcome: workload.OutcomeRunning, Attempt: 2, Restarts: 1, Disruptions: 1, InPlace: 1,
		Dropped: []int{2, 3}, Resized: "resized from 4 to 2 workers: workers 2, 3 dropped (cannot be scheduled)"})
	k.waitStatus("growin", "attempt 2 running with 2", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.Attempt == 2 && st.WorkersReady == 2
	})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.ns + "-g"}}
	if err := k.c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.c.Delete(context.Background(), node) })
	k.bindProbes("growin", 2, node.Name, nil)
	note := k.eventSaying("growin", operator.ReasonResized, "resized from 2 to 4 workers")
	for _, want := range []string{"room for 2 more worker(s): room probes placed on " + node.Name,
		"workers 2, 3 get new pods in attempt 1's pod set and join the gang at its next checkpoint", "the 2 running keep their pods"} {
		if !strings.Contains(note, want) {
			t.Errorf("Resized event %q; want it to say %q", note, want)
		}
	}
	got := k.waitStatus("growin", "4 workers, none dropped", func(st *v1.TrainJobStatus) bool {
		return st.Workers == 0 && len(st.DroppedWorkers) == 0
	})
	if st := got.Status; st.Attempt != 2 || st.PodAttempt() != 1 || st.Phase != v1.PhaseRunning {
		t.Errorf("status %+v; want attempt 2 still running on attempt 1's pods", st)
	}
	if r := progress.takenReadmits(); !allFor(r, []int{2, 3}) || r[0].Attempt != 2 {
		t.Errorf("readmit requests worker 0 took: %+v; want them for workers 2 and 3 in attempt 2", r)
	}
	var fresh []*corev1.Pod
	k.eventually("the readmitted workers' pods in attempt 1's pod set", func() (bool, string) {
		fresh = fresh[:0]
		var names []string
		for _, p := range k.pods("growin", 1) {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
				if w := workload.WorkerIndex(p.Labels); w >= 2 {
					fresh = append(fresh, &p)
				}
			}
		}
		return len(fresh) == 2, strings.Join(names, " ")
	})
	for _, p := range fresh {
		if env := envOf(p, workload.EnvDroppedWorkers); env != "" {
			t.Errorf("pod %s has %s=%q; want none dropped", p.Name, workload.EnvDroppedWorkers, env)
		}
	}
	k.eventSaying("growin", "WorkerReadmitted", "created the pod(s) of readmitted worker(s) [2 3]")
	k.eventually("the probes deleted", func() (bool, string) {
		n := len(k.probes())
		return n == 0, fmt.Sprintf("%d probes", n)
	})
	if st := k.get("growin").Status; st.Phase != v1.PhaseRunning || !strings.Contains(st.Reason, "readmitted worker(s) [2 3] start") {
		t.Errorf("status while the readmitted pods start: phase %s, reason %q; want Running, saying they start", st.Phase, st.Reason)
	}
	k.servePods(fresh, progress)
	// Worker 0 stops attempt 2 to grow: a restart that is no failure, told as Normal.
	progress.set(workload.Summary{Outcome: workload.OutcomeRestarting, Attempt: 2, Restarts: 1, Disruptions: 1, InPlace: 1,
		Growing: true, Reason: "attempt 2 ends: growing from 2 to 4 workers: workers 2, 3 readmitted"})
	if kind, _ := k.eventTyped("growin", operator.ReasonRestartingInPlace, "growing from 2 to 4 workers"); kind != corev1.EventTypeNormal {
		t.Errorf("the grow's RestartingInPlace event is %s; want Normal (a grow, not a failure)", kind)
	}
	progress.set(workload.Summary{Outcome: workload.OutcomeRunning, Attempt: 3, Restarts: 1, Disruptions: 1, InPlace: 1,
		Resized: "resized from 2 to 4 workers: workers 2, 3 readmitted", LastRestart: "attempt 3 grew in place: resized from 2 to 4 workers"})
	got = k.waitStatus("growin", "attempt 3 running in place with 4", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.Attempt == 3 && st.WorkersReady == 4
	})
	if st := got.Status; st.PodAttempt() != 1 || st.Restarts != 1 || len(st.LostNodes) != 0 {
		t.Errorf("status %+v; want attempt 3 on attempt 1's pods, the loss's restart only", st)
	}
	for _, n := range []int{2, 3} {
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName("growin", n)}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Errorf("Service of attempt %d: %v; want none (the gang resized in place)", n, err)
		}
	}
	for _, p := range k.pods("growin", 1) {
		k.setPod(&p, exited(0, ""))
	}
	k.waitStatus("growin", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
}

// envOf is the value of the worker container's variable name in p, or "".
func envOf(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}
