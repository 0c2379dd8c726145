package workload

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The built-in requests per GPU of a worker whose job names no CPU or memory (the
// operator's --worker-cpu-per-gpu and --worker-memory-per-gpu). They are half of the
// smallest common one-GPU machines (4 vCPUs and 16 GiB: AWS g4dn/g5/g6.xlarge, GCP
// g2-standard-4), so a one-GPU worker still fits beside kubelet's reservations and the
// node's DaemonSets; multi-GPU machines have 12 to 26 vCPUs and 48 GiB or more per GPU.
const (
	DefaultCPUPerGPU    = "2"
	DefaultMemoryPerGPU = "8Gi"
)

// PerGPU is what a worker with N GPUs requests, N times over, of what its job leaves
// unset: without it such a worker requests only nvidia.com/gpu, the BestEffort QoS
// class, the first evicted under memory pressure and the first killed on OOM. The
// defaults are requests only, no limits: the worker is Burstable, protected up to its
// request and free to use what the node has spare, and no job that ran before is
// OOM-killed or throttled at a limit it never chose. The job's own values always win:
// spec.resources.cpu and .memory, or a request or limit of the worker container in
// spec.kubernetes.podTemplate. A zero quantity adds nothing; so does the zero value,
// and so it does for workers without GPUs.
type PerGPU struct {
	CPU    resource.Quantity
	Memory resource.Quantity
}

// DefaultPerGPU is DefaultCPUPerGPU and DefaultMemoryPerGPU.
func DefaultPerGPU() PerGPU {
	return PerGPU{CPU: resource.MustParse(DefaultCPUPerGPU), Memory: resource.MustParse(DefaultMemoryPerGPU)}
}

// ParseCPUPerGPU parses an amount of CPU per GPU: cores ("2", "0.5") or millicores
// ("500m"); "0" is none.
func ParseCPUPerGPU(s string) (resource.Quantity, error) {
	q, err := parseAmount(s, "2 or 500m")
	if err != nil {
		return q, err
	}
	if q.Cmp(*resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)) != 0 {
		return q, fmt.Errorf("%q: CPU is counted in millicores (1m at least), as Kubernetes does", s)
	}
	return q, nil
}

// ParseMemoryPerGPU parses an amount of memory per GPU in bytes: "8Gi", "512Mi",
// "16G"; "0" is none.
func ParseMemoryPerGPU(s string) (resource.Quantity, error) {
	q, err := parseAmount(s, "8Gi or 512Mi")
	if err != nil {
		return q, err
	}
	if q.MilliValue()%1000 != 0 {
		return q, fmt.Errorf("%q: memory is a whole number of bytes, such as 8Gi or 512Mi", s)
	}
	return q, nil
}

func parseAmount(s, example string) (resource.Quantity, error) {
	if s == "" {
		return resource.Quantity{}, errors.New(`empty: give an amount such as ` + example + `, or "0" for none`)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, fmt.Errorf("%q is not an amount such as %s", s, example)
	}
	if q.Sign() < 0 {
		return q, fmt.Errorf("%q: must not be negative (\"0\" for none)", s)
	}
	return q, nil
}

// apply adds to the worker container of a rendered pod the requests per GPU that it
// lacks: a resource it has a request or a limit of (Kubernetes makes that limit the
// request) is left as it is.
func (p PerGPU) apply(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != WorkerContainer {
			continue
		}
		gpus, ok := c.Resources.Limits[GPUResource]
		if !ok {
			gpus = c.Resources.Requests[GPUResource]
		}
		n := gpus.Value()
		if n <= 0 {
			return
		}
		for name, per := range map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: p.CPU, corev1.ResourceMemory: p.Memory} {
			_, requested := c.Resources.Requests[name]
			_, limited := c.Resources.Limits[name]
			if per.IsZero() || requested || limited {
				continue
			}
			q := per.DeepCopy()
			q.Mul(n)
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = q
		}
	}
}
