package device

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/units"
)

// NotEnoughGPUsError reports a job that needs more GPUs than the inventory
// holds.
type NotEnoughGPUsError struct {
	// Requested is the number of GPUs the job needs in all.
	Requested int
	// Available is the number of GPUs in the inventory.
	Available int
	// Source is the inventory's Source, which says why it has none.
	Source string
	// Workers and GPUsPerWorker are the request that gave Requested.
	Workers, GPUsPerWorker int
}

// Error says how many GPUs the job needs and how many the machine has.
func (e *NotEnoughGPUsError) Error() string {
	need := fmt.Sprintf("the job needs %s (%s x %s)", units.Count(e.Requested, "GPU"),
		units.Count(e.Workers, "worker"), units.Count(e.GPUsPerWorker, "GPU"))
	switch {
	case e.Available == 0 && strings.HasPrefix(e.Source, "none"):
		return fmt.Sprintf("%s but this machine has %s", need, e.Source)
	case e.Source == "":
		return fmt.Sprintf("%s but this machine has %d", need, e.Available)
	default:
		return fmt.Sprintf("%s but this machine has %d (%s)", need, e.Available, e.Source)
	}
}

// Assign gives each of workers workers its own gpusPerWorker GPUs, disjoint
// and in index order: worker 0 gets the first gpusPerWorker GPUs, and so on.
// Each worker's slice is its own copy, empty (not nil) when gpusPerWorker
// is 0. If the inventory holds too few GPUs it returns a
// *NotEnoughGPUsError.
func Assign(inv Inventory, workers, gpusPerWorker int) ([][]GPU, error) {
	if workers < 0 || gpusPerWorker < 0 {
		return nil, fmt.Errorf("assign GPUs: workers (%d) and GPUs per worker (%d) must not be negative",
			workers, gpusPerWorker)
	}
	if gpusPerWorker > 0 && workers > math.MaxInt/gpusPerWorker {
		return nil, fmt.Errorf("assign GPUs: %d workers x %d GPUs is too many", workers, gpusPerWorker)
	}
	if need := workers * gpusPerWorker; need > len(inv.GPUs) {
		return nil, &NotEnoughGPUsError{
			Requested: need, Available: len(inv.GPUs), Source: inv.Source,
			Workers: workers, GPUsPerWorker: gpusPerWorker,
		}
	}
	gpus := slices.SortedFunc(slices.Values(inv.GPUs), func(a, b GPU) int { return a.Index - b.Index })
	out := make([][]GPU, workers)
	for w := range out {
		out[w] = make([]GPU, gpusPerWorker)
		copy(out[w], gpus[w*gpusPerWorker:])
	}
	return out, nil
}
