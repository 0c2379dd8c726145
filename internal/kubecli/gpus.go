package kubecli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/workload"
)

// gpuReadTimeout bounds reading one worker's GPUs through the API server.
const gpuReadTimeout = 3 * time.Second

// WorkerGPUs reads what the GPUs of a running worker pod do now: the worker serves them
// on its progress port (workload.GPUsPath), read through the API server's pod proxy, so
// this needs no network path to the pods (and the right to get pods/proxy).
func (c *Cluster) WorkerGPUs(ctx context.Context, pod *corev1.Pod) (workload.WorkerGPUs, error) {
	ctx, cancel := context.WithTimeout(ctx, gpuReadTimeout)
	defer cancel()
	raw, err := c.Core.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, strconv.Itoa(workload.ProgressPort),
		workload.GPUsPath, nil).DoRaw(ctx)
	if err != nil {
		return workload.WorkerGPUs{}, fmt.Errorf("read the GPUs of pod %s: %w", pod.Name, c.explain(err))
	}
	var out workload.WorkerGPUs
	if err := json.Unmarshal(raw, &out); err != nil {
		return workload.WorkerGPUs{}, fmt.Errorf("read the GPUs of pod %s: %w", pod.Name, err)
	}
	return out, nil
}

// GPUsOf reads the GPUs of the running pods among pods that ask for GPUs, in parallel,
// by pod name; a pod that cannot be read is left out.
func (c *Cluster) GPUsOf(ctx context.Context, pods []corev1.Pod) map[string]workload.WorkerGPUs {
	out := map[string]workload.WorkerGPUs{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || podGPUs(p) == 0 {
			continue
		}
		wg.Go(func() {
			g, err := c.WorkerGPUs(ctx, p)
			if err != nil {
				return
			}
			mu.Lock()
			out[p.Name] = g
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// UseOf sums what a worker reported of its GPUs: their mean utilisation (a GPU that could
// not say counts as idle) and their memory summed; false when it reported none.
func UseOf(g workload.WorkerGPUs) (*client.GPUUse, bool) {
	if g.Error != "" || len(g.GPUs) == 0 {
		return nil, false
	}
	u := &client.GPUUse{}
	for _, s := range g.GPUs {
		u.Percent += float64(max(s.UtilizationPercent, 0))
		u.UsedBytes += s.MemoryUsedBytes
		u.TotalBytes += s.MemoryTotalBytes
	}
	u.Percent /= float64(len(g.GPUs))
	return u, true
}

// podGPUs is the GPUs the pod's worker container asks for.
func podGPUs(p *corev1.Pod) int64 {
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[GPUResource]; ok && c.Name == workload.WorkerContainer {
			return q.Value()
		}
	}
	return 0
}
