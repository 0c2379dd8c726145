package kubecli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// GPUResource is the extended resource of NVIDIA's device plugin.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// workerPods returns the pods of one attempt of job (every attempt when attempt is 0),
// sorted by worker index, then oldest first. Pods left by an earlier TrainJob of the same
// name are not the job's.
func (c *Cluster) workerPods(ctx context.Context, job *v1.TrainJob, attempt int32) ([]corev1.Pod, error) {
	if attempt == job.Status.Attempt { // a gang that restarted in place runs on an earlier attempt's pods
		attempt = job.Status.PodAttempt()
	}
	sel := labels.Set{workload.LabelJob: job.Name}
	if attempt > 0 {
		sel[workload.LabelAttempt] = strconv.Itoa(int(attempt))
	}
	list, err := c.Core.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, c.explain(err)
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		uid, ok := p.Labels[workload.LabelJobUID]
		return ok && job.UID != "" && uid != string(job.UID)
	})
	sortPods(pods)
	return pods, nil
}

// sortPods orders pods by namespace, job, attempt, worker index, then creation.
func sortPods(pods []corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		if ja, jb := a.Labels[workload.LabelJob], b.Labels[workload.LabelJob]; ja != jb {
			return strings.Compare(ja, jb)
		}
		if d := podAttempt(&a) - podAttempt(&b); d != 0 {
			return d
		}
		if d := workerIndex(&a) - workerIndex(&b); d != 0 {
			return d
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
}

// workerIndex is a pod's worker index, or -1 when it has none.
func workerIndex(p *corev1.Pod) int { return workload.WorkerIndex(p.Labels) }

// podAttempt is the attempt a pod belongs to, 0 when unlabelled.
func podAttempt(p *corev1.Pod) int {
	i, _ := strconv.Atoi(p.Labels[workload.LabelAttempt])
	return i
}

// newestPerWorker keeps the newest pod of each worker index (a replaced pod's successor).
func newestPerWorker(pods []corev1.Pod) map[int]*corev1.Pod {
	out := map[int]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		w := workerIndex(p)
		if old, ok := out[w]; !ok || !p.CreationTimestamp.Before(&old.CreationTimestamp) {
			out[w] = p
		}
	}
	return out
}

// terminated reports whether a pod has ended (and holds no resources any more).
func terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// workerStatus returns the status of a pod's worker container, nil before it has one.
func workerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == workload.WorkerContainer {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// podState says in a word what a worker pod is doing, and why in a message: its worker
// container's state (Running, ImagePullBackOff, OOMKilled (exit 137)), an init container
// that holds it back, or why it is not scheduled.
func podState(p *corev1.Pod) (state, message string) {
	if p.DeletionTimestamp != nil {
		return "Terminating", ""
	}
	for _, s := range p.Status.InitContainerStatuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			return "Init:" + s.State.Waiting.Reason, s.State.Waiting.Message
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
			return "Init:" + orDash(s.State.Terminated.Reason), s.State.Terminated.Message
		}
	}
	if s := workerStatus(p); s != nil {
		switch st := s.State; {
		case st.Running != nil:
			return "Running", ""
		case st.Terminated != nil:
			reason := st.Terminated.Reason
			if reason == "" {
				reason = "Terminated"
			}
			return fmt.Sprintf("%s (exit %d)", reason, st.Terminated.ExitCode), st.Terminated.Message
		case st.Waiting != nil && st.Waiting.Reason != "":
			return st.Waiting.Reason, st.Waiting.Message
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return orDash(c.Reason), c.Message
		}
	}
	if p.Status.Reason != "" {
		return p.Status.Reason, p.Status.Message
	}
	return orDash(string(p.Status.Phase)), p.Status.Message
}

// podRestarts is how many times the kubelet restarted the pod's worker container.
func podRestarts(p *corev1.Pod) int32 {
	if s := workerStatus(p); s != nil {
		return s.RestartCount
	}
	return 0
}

// podRequests is what a pod asks its node for, as the scheduler counts it: its
// containers' requests added up (a limit stands for a missing request), the largest init
// container's where that is more, and the pod's overhead.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		addList(total, containerRequests(&c))
	}
	for _, c := range p.Spec.InitContainers {
		for name, q := range containerRequests(&c) {
			if cur, ok := total[name]; !ok || q.Cmp(cur) > 0 {
				total[name] = q.DeepCopy()
			}
		}
	}
	addList(total, p.Spec.Overhead)
	return total
}

// containerRequests is a container's requests, with its limits where it requests nothing.
func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// addList adds every quantity of add to total.
func addList(total, add corev1.ResourceList) {
	for name, q := range add {
		cur := total[name]
		cur.Add(q)
		total[name] = cur
	}
}

// amount reads a resource of a list: GPUs and bytes as whole numbers, CPU in thousandths.
func amount(list corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := list[name]
	if !ok {
		return 0
	}
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// gpus is how many GPUs a resource list holds.
func gpus(list corev1.ResourceList) int64 { return amount(list, GPUResource) }

// WorkerSummary says which worker a pod is (-1 when its labels do not say), what it is
// doing in a word, and why: as 'get --kube' shows it.
func WorkerSummary(p *corev1.Pod) (worker int, state, message string) {
	state, message = podState(p)
	return workerIndex(p), state, message
}

// rankRange writes the ranks a worker runs: "3", or "4-7" with several processes per
// worker; "?" for a pod whose worker index is unknown.
func rankRange(s *v1.TrainJobSpec, worker int) string {
	if worker < 0 {
		return "?"
	}
	procs := procsPerWorker(s)
	if procs == 1 {
		return strconv.Itoa(worker)
	}
	return fmt.Sprintf("%d-%d", worker*procs, worker*procs+procs-1)
}

// notAvailable is what a cell shows that has no value yet, as Arena shows it.
const notAvailable = "N/A"

// WorkerNodes are the nodes of the TrainJobs' worker 0 pods of their current attempts, as
// 'list --kube' and 'top job --kube' show them, by namespace and name.
type WorkerNodes map[string]string

// of is the node of j's worker 0, or N/A when its pod is not on one (or there is none).
func (n WorkerNodes) of(j *v1.TrainJob) string {
	if node := n[j.Namespace+"/"+j.Name]; node != "" {
		return node
	}
	return notAvailable
}

// WorkerNodes returns the node of worker 0's pod of each job's current attempt: the node of
// its rank 0, where Arena shows its chief's. It lists only worker 0's pods, of the
// cluster's namespace or of every namespace.
func (c *Cluster) WorkerNodes(ctx context.Context, jobs []v1.TrainJob, allNamespaces bool) (WorkerNodes, error) {
	out := WorkerNodes{}
	if len(jobs) == 0 {
		return out, nil
	}
	ns := c.Namespace
	if allNamespaces {
		ns = ""
	}
	sel := labels.Set{workload.LabelManagedBy: workload.ManagedBy, workload.LabelWorkerIndex: "0"}.String()
	list, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return out, c.explain(err)
	}
	return workerZeroNodes(jobs, list.Items), nil
}

// workerZeroNodes finds, for each job, the newest of pods that is its current attempt's
// worker 0, and that pod's node.
func workerZeroNodes(jobs []v1.TrainJob, pods []corev1.Pod) WorkerNodes {
	byKey := map[string]*v1.TrainJob{}
	for i := range jobs {
		byKey[jobs[i].Namespace+"/"+jobs[i].Name] = &jobs[i]
	}
	out := WorkerNodes{}
	newest := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		key := p.Namespace + "/" + p.Labels[workload.LabelJob]
		j := byKey[key]
		if j == nil || j.Status.Attempt == 0 || podAttempt(p) != int(j.Status.PodAttempt()) || workerIndex(p) != 0 {
			continue
		}
		if uid, ok := p.Labels[workload.LabelJobUID]; ok && j.UID != "" && uid != string(j.UID) {
			continue // an earlier job of that name
		}
		if old := newest[key]; old == nil || !p.CreationTimestamp.Before(&old.CreationTimestamp) {
			newest[key] = p
			out[key] = p.Spec.NodeName
		}
	}
	return out
}
