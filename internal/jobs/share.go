package jobs

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/scheduler"
)

// A job that does not say how much CPU its workers need (spec.resources.cpu, submit's
// --cpus-per-worker) gets a default share when it is submitted, so that it does not land
// beside a job that holds every core as if it needed none:
//
//   - a worker without GPUs: 1 CPU per process, as Ray Train gives each worker process
//     1 CPU by default;
//   - a worker with GPUs: its part of the machine's CPU by GPUs, the machine's cores
//     divided by its GPUs, times the worker's GPUs, and at least 1 CPU;
//
// and never more than the machine's CPU divided among the job's workers, so the default
// alone never makes a job too large for the machine. The share is written into the stored
// spec, so the scheduler reserves what the job's workers are told they have
// (OMP_NUM_THREADS is the worker's CPU divided among its processes).

// DefaultCPU returns the CPU, in millicores, that each worker of a job with spec reserves
// on node when spec names none (see above); 0 when the node offers no CPU to count.
func DefaultCPU(node scheduler.Node, spec *v1.TrainJobSpec) int64 {
	if node.MilliCPU <= 0 {
		return 0
	}
	share := int64(spec.ProcCount()) * 1000
	if gpus := int64(len(slices.Compact(slices.Sorted(slices.Values(node.GPUs))))); spec.Resources.GPU > 0 && gpus > 0 {
		share = max(1000, node.MilliCPU/gpus*int64(spec.Resources.GPU))
	}
	return min(share, node.MilliCPU/int64(max(1, spec.WorkerCount())))
}

// defaultCPU sets the job's CPU per worker to DefaultCPU when it names none.
func defaultCPU(node scheduler.Node, job *v1.TrainJob) {
	r := &job.Spec.Resources
	if r.CPU != nil {
		return
	}
	if milli := DefaultCPU(node, &job.Spec); milli > 0 {
		r.CPU = resource.NewMilliQuantity(milli, resource.DecimalSI)
	}
}
