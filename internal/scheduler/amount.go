package scheduler

import (
	"math"
	"slices"
)

// amount is a quantity of each resource: a job's whole need, what a node
// has, or what is left. What is left may be negative if the running jobs
// use more than the node has (a node that shrank); such a resource holds
// nothing.
type amount struct {
	gpus     int64
	milliCPU int64
	memory   int64
}

// covers reports whether need fits in a, resource by resource. A zero need
// always fits.
func (a amount) covers(need amount) bool {
	return need.gpus <= max(a.gpus, 0) &&
		need.milliCPU <= max(a.milliCPU, 0) &&
		need.memory <= max(a.memory, 0)
}

// minus returns a - b, resource by resource.
func (a amount) minus(b amount) amount {
	return amount{gpus: a.gpus - b.gpus, milliCPU: a.milliCPU - b.milliCPU, memory: a.memory - b.memory}
}

// atLeastZero returns a with each negative resource raised to zero.
func (a amount) atLeastZero() amount {
	return amount{gpus: max(a.gpus, 0), milliCPU: max(a.milliCPU, 0), memory: max(a.memory, 0)}
}

// demand returns what all of a job's workers need together. A negative
// request counts as zero, and a product too large for an int64 as
// math.MaxInt64, which fits nowhere.
func demand(j Job) amount {
	w := int64(j.Workers)
	return amount{
		gpus:     mulSat(w, int64(j.PerWorker.GPUs)),
		milliCPU: mulSat(w, j.PerWorker.MilliCPU),
		memory:   mulSat(w, j.PerWorker.MemoryBytes),
	}
}

// capacity returns what the node offers in all.
func capacity(n Node) amount {
	return amount{gpus: int64(len(usableGPUs(n))), milliCPU: max(n.MilliCPU, 0), memory: max(n.MemoryBytes, 0)}
}

// usableGPUs returns the node's GPU indices, ascending and without
// duplicates, in a new slice.
func usableGPUs(n Node) []int {
	return slices.Compact(slices.Sorted(slices.Values(n.GPUs)))
}

// mulSat returns a x b for a, b >= 0, or math.MaxInt64 if that overflows.
// A negative factor gives zero.
func mulSat(a, b int64) int64 {
	switch {
	case a <= 0 || b <= 0:
		return 0
	case a > math.MaxInt64/b:
		return math.MaxInt64
	default:
		return a * b
	}
}

// addSat returns a + b for a, b >= 0, or math.MaxInt64 if that overflows.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
