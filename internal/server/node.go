package server

import (
	"context"
	"net/http"
	"slices"

	"github.com/trainyard/trainyard/internal/store"
)

// node answers GET /api/v1/node: what this machine offers to jobs and what running jobs
// hold, with the GPUs' utilization when the server can measure it.
func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	n, err := s.nodeState(r.Context())
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}

// nodeState counts the machine's resources against the running jobs' allocations.
func (s *Server) nodeState(ctx context.Context) (Node, error) {
	running, err := s.cfg.Jobs.List(store.Filter{Statuses: []store.Status{store.Running}})
	if err != nil {
		return Node{}, err
	}
	res := s.cfg.Node.Resources
	held := s.allocated(running)
	indices := gpuIndices(res.GPUs)
	n := Node{
		GPUs:        GPUs{Amount: newAmount(int64(len(indices)), held.gpus), Indices: indices},
		MilliCPU:    newAmount(res.MilliCPU, held.milliCPU),
		MemoryBytes: newAmount(res.MemoryBytes, held.memory),
	}
	if use := s.cfg.Node.Utilization; use != nil {
		if n.GPUs.Utilization, err = use(ctx); err != nil {
			s.log.Warn("measure GPU utilization", "err", err)
		}
	}
	return n, nil
}

// held is what running jobs hold of the machine.
type held struct {
	gpus, milliCPU, memory int64
}

// allocated sums what the running jobs hold: the GPUs the scheduler gave them, the CPU
// and memory their specs ask for, and their gangs' leases (see ganglease), to which their
// own CPU and memory are lent.
func (s *Server) allocated(running []*store.Job) held {
	var h held
	for _, j := range running {
		for _, w := range j.GPUs {
			h.gpus += int64(len(w))
		}
		var milliCPU, memory int64
		if spec, err := decodeSpec(j); err == nil {
			workers, r := int64(spec.Spec.WorkerCount()), spec.Spec.Resources
			if r.CPU != nil {
				milliCPU = workers * r.CPU.MilliValue()
			}
			if r.Memory != nil {
				memory = workers * r.Memory.Value()
			}
		}
		if g := j.Gang; g != nil { // what its own process leased for a gang, once granted
			for _, w := range g.GPUs {
				h.gpus += int64(len(w))
			}
			if g.GPUs != nil {
				h.milliCPU += int64(g.Workers) * g.MilliCPUPerWorker
				h.memory += int64(g.Workers) * g.MemoryBytesPerWorker
			}
			milliCPU, memory = g.DriverHolds(milliCPU, memory)
		}
		h.milliCPU += milliCPU
		h.memory += memory
	}
	return h
}

// gpuIndices returns the node's GPU indices sorted, each once; none is an empty list
// (JSON [], not null).
func gpuIndices(gpus []int) []int {
	out := append([]int{}, gpus...)
	slices.Sort(out)
	return slices.Compact(out)
}

// newAmount returns total, allocated and what is left (never below zero).
func newAmount(total, allocated int64) Amount {
	return Amount{Total: total, Allocated: allocated, Free: max(0, total-allocated)}
}
