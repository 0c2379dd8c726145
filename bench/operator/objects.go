package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// Namespaces: the operator's TrainJobs, and the peer's Jobs and Services.
const (
	operatorNamespace = "bench"
	directNamespace   = "direct"
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

// attemptNames are the names of attempt n's Jobs (and Services) of jobs TrainJobs.
func attemptNames(jobs, n int) []string {
	out := make([]string, jobs)
	for i := range out {
		out[i] = workload.AttemptName(jobName(i), n)
	}
	return out
}

// podName is the name of worker w's pod of an attempt's Job.
func podName(job string, w int) string { return fmt.Sprintf("%s-%d-x", job, w) }

// podNames are the names of every pod of attempt n.
func podNames(jobs, workers, n int) []string {
	out := make([]string, 0, jobs*workers)
	for _, j := range attemptNames(jobs, n) {
		for w := range workers {
			out = append(out, podName(j, w))
		}
	}
	return out
}

// startPods makes the Job's pods as the Job controller would (the template's labels, the
// completion index as label and annotation, the Job as controller), then sets each
// Running as a kubelet would. It returns the pods as last written.
func startPods(ctx context.Context, c client.Client, job *batchv1.Job) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for i := range int(*job.Spec.Completions) {
		tmpl := job.Spec.Template.DeepCopy()
		idx := strconv.Itoa(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName(job.Name, i), Namespace: job.Namespace,
				Labels: tmpl.Labels, Annotations: map[string]string{workload.LabelCompletionIndex: idx},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: tmpl.Spec,
		}
		p.Labels[workload.LabelCompletionIndex] = idx
		p.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, i)
		if err := c.Create(ctx, p); err != nil {
			return nil, fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		if err := c.Status().Update(ctx, p); err != nil {
			return nil, fmt.Errorf("set pod %s running: %w", p.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// failPod sets a running pod's status as a kubelet does when its worker exits with code
// 1. The pod is as last written, so no read is needed.
func failPod(ctx context.Context, c client.Client, p *corev1.Pod) error {
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "Traceback (most recent call last): RuntimeError: bench"}}}}
	if err := c.Status().Update(ctx, p); err != nil {
		return fmt.Errorf("fail pod %s: %w", p.Name, err)
	}
	return nil
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
