package kubecli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/units"
	"github.com/trainyard/trainyard/internal/workload"
)

// gpuProductLabel is the label NVIDIA's GPU feature discovery puts on a node: its GPUs'
// model.
const gpuProductLabel = "nvidia.com/gpu.product"

// activePods selects the pods that hold resources on their node: those that have not
// ended.
const activePods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// Usage is an amount a node offers to pods (allocatable) and how much of it the pods on
// it request.
type Usage struct {
	Allocatable int64 `json:"allocatable"`
	Requested   int64 `json:"requested"`
}

// Free is what is left: allocatable less requested, never below zero.
func (u Usage) Free() int64 { return max(0, u.Allocatable-u.Requested) }

// NodeUsage is one node of 'top node --kube'.
type NodeUsage struct {
	Name        string `json:"name"`
	Ready       bool   `json:"ready"`
	Schedulable bool   `json:"schedulable"`
	// GPUModel is the node's nvidia.com/gpu.product label, when it has one.
	GPUModel    string `json:"gpuModel,omitempty"`
	GPUs        Usage  `json:"gpus"`
	MilliCPU    Usage  `json:"milliCPU"`
	MemoryBytes Usage  `json:"memoryBytes"`
	// Pods is the number of pods on the node that have not ended.
	Pods int `json:"pods"`
}

// NodeUsage returns every node with what it offers and what the pods on it that have not
// ended request, as the scheduler counts it, in name order.
func (c *Cluster) NodeUsage(ctx context.Context) ([]NodeUsage, error) {
	nodes, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c.explain(err)
	}
	pods, err := c.Core.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: activePods})
	if err != nil {
		return nil, c.explain(err)
	}
	requested := map[string]corev1.ResourceList{}
	count := map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || terminated(p) {
			continue
		}
		if requested[p.Spec.NodeName] == nil {
			requested[p.Spec.NodeName] = corev1.ResourceList{}
		}
		addList(requested[p.Spec.NodeName], podRequests(p))
		count[p.Spec.NodeName]++
	}
	out := make([]NodeUsage, 0, len(nodes.Items))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		alloc, req := n.Status.Allocatable, requested[n.Name]
		u := NodeUsage{Name: n.Name, Ready: nodeReady(n), Schedulable: !n.Spec.Unschedulable, GPUModel: n.Labels[gpuProductLabel],
			GPUs:        Usage{gpus(alloc), gpus(req)},
			MilliCPU:    Usage{amount(alloc, corev1.ResourceCPU), amount(req, corev1.ResourceCPU)},
			MemoryBytes: Usage{amount(alloc, corev1.ResourceMemory), amount(req, corev1.ResourceMemory)},
			Pods:        count[n.Name]}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b NodeUsage) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// nodeReady reports whether a node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeStatus writes a node's status as kubectl get nodes does: Ready, NotReady, with
// SchedulingDisabled when it is cordoned.
func nodeStatus(n *NodeUsage) string {
	s := "Ready"
	if !n.Ready {
		s = "NotReady"
	}
	if !n.Schedulable {
		s += ",SchedulingDisabled"
	}
	return s
}

// PrintNodeUsage writes one row per node, then the cluster's GPUs in all.
func PrintNodeUsage(v View, nodes []NodeUsage) error {
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(v.Out, "No nodes.")
		return err
	}
	tw := v.table()
	header := "NODE\tSTATUS\tGPUS\tGPUS REQUESTED\tGPUS FREE\tCPU\tCPU REQUESTED\tMEMORY\tMEMORY REQUESTED\tPODS"
	if v.Wide {
		header += "\tGPU MODEL"
	}
	fmt.Fprintln(tw, header)
	var total Usage
	for i := range nodes {
		n := &nodes[i]
		total.Allocatable += n.GPUs.Allocatable
		total.Requested += n.GPUs.Requested
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s\t%s (%s)\t%s\t%s (%s)\t%d", n.Name, nodeStatus(n),
			n.GPUs.Allocatable, n.GPUs.Requested, n.GPUs.Free(),
			units.Cores(n.MilliCPU.Allocatable), units.Cores(n.MilliCPU.Requested), percent(n.MilliCPU.Requested, n.MilliCPU.Allocatable),
			units.BytesIEC(n.MemoryBytes.Allocatable), units.BytesIEC(n.MemoryBytes.Requested), percent(n.MemoryBytes.Requested, n.MemoryBytes.Allocatable),
			n.Pods)
		if v.Wide {
			row += "\t" + orDash(n.GPUModel)
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(v.Out, "\nGPUs: %d requested of %d allocatable on %s (%d free).\n"+
		"Allocated/Total GPUs In Cluster: %d/%d (%s)\n", // Arena's top node line
		total.Requested, total.Allocatable, units.Count(len(nodes), "node"), total.Free(),
		total.Requested, total.Allocatable, percent(total.Requested, total.Allocatable))
	return err
}

// JobUsage is one TrainJob of 'top job --kube'.
type JobUsage struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Phase     v1.JobPhase `json:"phase,omitempty"`
	Workers   int         `json:"workers"`
	Ready     int32       `json:"ready"`
	// GPUsRequested is what the job asks for: workers x GPUs per worker.
	GPUsRequested int64 `json:"gpusRequested"`
	// GPUsHeld is what its pods that are on a node and have not ended request: Arena's
	// GPU(Allocated).
	GPUsHeld int64 `json:"gpusHeld"`
	// Node is the node of worker 0's pod of the current attempt, when it is on one.
	Node      string            `json:"node,omitempty"`
	Iteration int64             `json:"iteration,omitempty"`
	Metrics   map[string]string `json:"metrics,omitempty"`
	Created   metav1.Time       `json:"created"`
}

// JobUsage returns what each TrainJob of the namespace (or of all) asks for and holds, and
// the node of its worker 0.
func (c *Cluster) JobUsage(ctx context.Context, allNamespaces bool) ([]JobUsage, error) {
	jobs, err := c.ListJobs(ctx, allNamespaces)
	if err != nil {
		return nil, err
	}
	ns := c.Namespace
	if allNamespaces {
		ns = ""
	}
	sel := labels.Set{workload.LabelManagedBy: workload.ManagedBy}.String()
	pods, err := c.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel, FieldSelector: activePods})
	if err != nil {
		return nil, c.explain(err)
	}
	held := map[string]int64{} // by namespace/job UID
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != "" && !terminated(p) {
			held[p.Namespace+"/"+p.Labels[workload.LabelJob]+"/"+p.Labels[workload.LabelJobUID]] += gpus(podRequests(p))
		}
	}
	nodes, err := c.WorkerNodes(ctx, jobs, allNamespaces)
	if err != nil {
		return nil, err
	}
	out := make([]JobUsage, 0, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		key := j.Namespace + "/" + j.Name + "/"
		out = append(out, JobUsage{Namespace: j.Namespace, Name: j.Name, Phase: j.Status.Phase, Workers: j.GangSize(),
			Ready: j.Status.WorkersReady, GPUsRequested: int64(j.GangSize()) * int64(j.Spec.Resources.GPU),
			GPUsHeld: held[key+string(j.UID)] + held[key], Node: nodes[j.Namespace+"/"+j.Name], Iteration: j.Status.Iteration,
			Metrics: j.Status.LastMetrics, Created: j.CreationTimestamp})
	}
	return out, nil
}

// metricsWidth is the most of a job's metrics top job shows; -o wide shows them all.
const metricsWidth = 50

// PrintJobUsage writes one row per job, with Arena's GPU(Requested) and GPU(Allocated)
// columns, then the totals: the GPUs allocated to every job, of those requested by the
// jobs that want them now (not those that ended or are suspended), as Arena counts its
// running jobs'.
func PrintJobUsage(v View, jobs []JobUsage, allNamespaces bool, where string) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintf(v.Out, "No TrainJobs %s.\n", where)
		return err
	}
	tw := v.table()
	header := "NAME\tPHASE\tREADY\tGPU(Requested)\tGPU(Allocated)\tNODE\tITERATION\tAGE\tLAST METRICS"
	if allNamespaces {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	var requested, allocated int64
	idle := 0
	for _, j := range jobs {
		allocated += j.GPUsHeld
		if j.Phase.Finished() || j.Phase == v1.PhaseSuspended {
			idle++
		} else {
			requested += j.GPUsRequested
		}
		metrics := cell(metricsText(j.Metrics))
		if !v.Wide {
			metrics = shorten(metrics, metricsWidth)
		}
		node := j.Node
		if node == "" {
			node = notAvailable
		}
		row := fmt.Sprintf("%s\t%s\t%d/%d\t%d\t%d\t%s\t%d\t%s\t%s", j.Name, orDash(string(j.Phase)), j.Ready, j.Workers,
			j.GPUsRequested, j.GPUsHeld, node, j.Iteration, v.age(j.Created), orDash(metrics))
		if allNamespaces {
			row = j.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	counted := units.Count(len(jobs)-idle, "job")
	switch {
	case idle == 1:
		counted += " (not counting 1 that ended or is suspended)"
	case idle > 1:
		counted += fmt.Sprintf(" (not counting %d that ended or are suspended)", idle)
	}
	_, err := fmt.Fprintf(v.Out, "\nGPUs: %d allocated of %d requested by %s.\n"+
		"Total Allocated/Requested GPUs of Training Jobs: %d/%d\n", // Arena's top job line
		allocated, requested, counted, allocated, requested)
	return err
}

// WorkerUsage is one worker pod of 'top job --kube NAME'.
type WorkerUsage struct {
	Worker      int    `json:"worker"`
	Pod         string `json:"pod"`
	Node        string `json:"node,omitempty"`
	Phase       string `json:"phase"`
	State       string `json:"state"`
	GPUs        int64  `json:"gpus"`
	MilliCPU    int64  `json:"milliCPU"`
	MemoryBytes int64  `json:"memoryBytes"`
	// GPUUse is what the pod's GPUs do now, as its worker samples them (nvidia-smi);
	// absent when the pod runs no GPU or could not be read.
	GPUUse *client.GPUUse `json:"gpuUse,omitempty"`
}

// JobWorkers is one TrainJob of 'top job --kube NAME' and the pods of its current attempt.
type JobWorkers struct {
	Job     JobUsage      `json:"job"`
	Attempt int32         `json:"attempt"`
	Workers []WorkerUsage `json:"workers"`
}

// WorkerUsage returns what the TrainJob name and each worker pod of its current attempt
// request, and what the running pods' GPUs do now (Arena's top job NAME).
func (c *Cluster) WorkerUsage(ctx context.Context, name string) (*JobWorkers, error) {
	job, err := c.GetJob(ctx, name)
	if err != nil {
		return nil, err
	}
	out := &JobWorkers{Attempt: job.Status.Attempt, Job: JobUsage{Namespace: job.Namespace, Name: job.Name, Phase: job.Status.Phase,
		Workers: job.Spec.WorkerCount(), Ready: job.Status.WorkersReady,
		GPUsRequested: int64(job.Spec.WorkerCount()) * int64(job.Spec.Resources.GPU),
		Iteration:     job.Status.Iteration, Metrics: job.Status.LastMetrics, Created: job.CreationTimestamp}}
	if job.Status.Attempt == 0 {
		return out, nil
	}
	pods, err := c.workerPods(ctx, job, job.Status.Attempt)
	if err != nil {
		return nil, err
	}
	use := c.GPUsOf(ctx, pods)
	for i := range pods {
		p := &pods[i]
		req := podRequests(p)
		state, _ := podState(p)
		w := WorkerUsage{Worker: workerIndex(p), Pod: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), State: state,
			GPUs: gpus(req), MilliCPU: amount(req, corev1.ResourceCPU), MemoryBytes: amount(req, corev1.ResourceMemory)}
		if u, ok := UseOf(use[p.Name]); ok {
			w.GPUUse = u
		}
		if p.Spec.NodeName != "" && !terminated(p) {
			out.Job.GPUsHeld += w.GPUs
		}
		out.Workers = append(out.Workers, w)
	}
	return out, nil
}

// PrintJobWorkers writes a job's line, then one row per worker pod.
func PrintJobWorkers(v View, jw *JobWorkers) error {
	j := &jw.Job
	head := fmt.Sprintf("TrainJob %s/%s: %s", j.Namespace, j.Name, orDash(string(j.Phase)))
	if jw.Attempt > 0 {
		head += fmt.Sprintf(", attempt %d", jw.Attempt)
	}
	head += fmt.Sprintf(", %d/%d workers ready, GPUs %d allocated of %d requested", j.Ready, j.Workers, j.GPUsHeld, j.GPUsRequested)
	if j.Iteration > 0 {
		head += fmt.Sprintf("\nIteration %d: %s", j.Iteration, orDash(cell(metricsText(j.Metrics))))
	}
	if _, err := fmt.Fprintln(v.Out, head); err != nil {
		return err
	}
	if len(jw.Workers) == 0 {
		_, err := fmt.Fprintln(v.Out, "No worker pods.")
		return err
	}
	fmt.Fprintln(v.Out)
	tw := v.table()
	fmt.Fprintln(tw, "WORKER\tPOD\tNODE\tPHASE\tSTATE\tGPUS\tGPU UTIL\tGPU MEMORY\tCPU\tMEMORY")
	for _, w := range jw.Workers {
		worker := "?"
		if w.Worker >= 0 {
			worker = fmt.Sprint(w.Worker)
		}
		util, mem := "-", "-"
		if u := w.GPUUse; u != nil {
			util = fmt.Sprintf("%.0f%%", u.Percent)
			mem = fmt.Sprintf("%d/%d MiB", u.UsedBytes>>20, u.TotalBytes>>20)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", worker, w.Pod, orDash(w.Node), orDash(w.Phase), cell(w.State),
			w.GPUs, util, mem, units.Cores(w.MilliCPU), units.BytesIEC(w.MemoryBytes))
	}
	return tw.Flush()
}
