package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// Namespaces: the operator's TrainJobs, the peer's Services and pods, and KubeRay's RayClusters.
const (
	operatorNamespace = "bench"
	directNamespace   = "direct"
	rayNamespace      = "ray"
)

// jobName is the name of TrainJob i.
func jobName(i int) string { return fmt.Sprintf("tj-%05d", i) }

// trainJob is TrainJob i: workers workers of `python3 train.py` in PyTorch's image, one
// restart allowed (so that a failed worker restarts the gang).
func trainJob(ns string, i, workers int) *v1.TrainJob {
	w := int32(workers)
	return &v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: jobName(i), Namespace: ns},
		Spec: v1.TrainJobSpec{Workers: &w, Command: []string{"python3", "train.py"}, MaxRestarts: 1,
			Kubernetes: &v1.KubernetesSpec{Image: "pytorch/pytorch:2.5.1"}},
	}
}

// attemptNames are the names of attempt n's Services of jobs TrainJobs.
func attemptNames(jobs, n int) []string {
	out := make([]string, jobs)
	for i := range out {
		out[i] = workload.AttemptName(jobName(i), n)
	}
	return out
}

// podNames are the names of every worker's pod of attempt n (workload.PodName: "<job>-aN-i").
func podNames(jobs, workers, n int) []string {
	out := make([]string, 0, jobs*workers)
	for i := range jobs {
		for w := range workers {
			out = append(out, workload.PodName(jobName(i), n, w))
		}
	}
	return out
}

// podKey is the name a worker's pod is tracked under: workload.PodName from its labels
// (job, attempt, worker index), so that pods an Indexed Job's controller named with a
// random suffix (the operator before 6df8120) count as their worker's; a pod without
// those labels (a RayCluster's) keeps its own name.
func podKey(name string, labels map[string]string) string {
	job, attempt, idx := labels[workload.LabelJob], labels[workload.LabelAttempt], workload.WorkerIndex(labels)
	n, err := strconv.Atoi(attempt)
	if job == "" || err != nil || idx < 0 {
		return name
	}
	return workload.PodName(job, n, idx)
}

// runningPatch is the status a kubelet writes once a worker's containers run: the init
// container done, the worker container running and ready.
func runningPatch() []byte {
	now := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodRunning,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: workload.InitContainer, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: workload.WorkerContainer, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	return statusPatch(st)
}

// failedPatch is the status a kubelet writes when the worker exits with code 1.
func failedPatch() []byte {
	return statusPatch(corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{Name: workload.WorkerContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				Message: "Traceback (most recent call last): RuntimeError: bench"}}}}})
}

func statusPatch(st corev1.PodStatus) []byte {
	data, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		panic(err) // a PodStatus always marshals
	}
	return data
}

// patchPodStatus writes a pod's status as a kubelet does (a merge patch of pods/status,
// with no precondition, so a pod the operator changed meanwhile needs no second read).
func patchPodStatus(ctx context.Context, c client.Client, ns, name string, patch []byte) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch the status of pod %s: %w", name, err)
	}
	return nil
}

// listAttemptPods lists the pods of attempt n in namespace ns, straight from the API
// server, as a map from podKey to the pod's name.
func listAttemptPods(ctx context.Context, c client.Client, ns string, n int) (map[string]string, error) {
	var l metav1.PartialObjectMetadataList
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{workload.LabelAttempt: strconv.Itoa(n)}); err != nil {
		return nil, fmt.Errorf("list the pods of attempt %d: %w", n, err)
	}
	out := make(map[string]string, len(l.Items))
	for _, p := range l.Items {
		out[podKey(p.Name, p.Labels)] = p.Name
	}
	return out, nil
}

// failedWorker is the worker the benchmark fails in each job: worker 1, or 0 alone.
func failedWorker(workers int) int { return min(1, workers-1) }

// hammer calls op(0) to op(n-1) from workers goroutines at once, each taking the next
// index, stops at the first error, and returns the wall time.
func hammer(n, workers int, op func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && !failed.Load(); i = int(next.Add(1) - 1) {
				if errs[w] = op(i); errs[w] != nil {
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}
