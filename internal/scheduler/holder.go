package scheduler

import (
	"slices"
	"time"
)

// holder is a job that holds resources on the node: one that was running
// already, or one started earlier in the same decision. An elastic gang that
// shrinks is two holders: the workers it keeps, and those going away.
type holder struct {
	// gpus holds the GPUs of all its workers, and workerGPUs each worker's
	// (nil when unknown: a job without GPUs may leave them out).
	gpus       []int
	workerGPUs [][]int
	// milliCPU and memory are what all its workers asked for; per is what
	// one asks for.
	milliCPU, memory int64
	per              amount
	// end is when the job is expected to end, if ends is true: Started +
	// TimeLimit, or the decision's time for a job already past it or going
	// away.
	end  time.Time
	ends bool
	// id, priority and started are the job's, for choosing whom to preempt.
	id       string
	priority int
	started  time.Time
	// going is set for a job that is being stopped (Running.Preempting) or
	// that this decision preempts: it is expected to end now.
	going bool
	// workers is how many workers it holds; min and max are the job's fewest
	// and most (equal for a gang that is not elastic). resizing is set for a
	// gang whose resize is under way (Running.Resizing) or decided now, and
	// existing for one that was running before this decision.
	workers, min, max  int
	resizing, existing bool
}

// holdersOf returns what a running job holds and when it is expected to
// end: one holder, or two for an elastic gang that shrinks (the workers it
// keeps, and those going away).
func holdersOf(r Running, now time.Time) []holder {
	workers := r.Workers
	if workers <= 0 {
		workers = r.Job.Workers
	}
	per := demand(r.Job.atSize(1))
	h := holder{gpus: slices.Concat(r.GPUs...), workerGPUs: r.GPUs, per: per,
		milliCPU: mulSat(int64(workers), per.milliCPU), memory: mulSat(int64(workers), per.memory),
		id: r.Job.ID, priority: r.Job.Priority, started: r.Started,
		workers: workers, min: min(r.Job.minWorkers(), workers), max: max(r.Job.Workers, workers), resizing: r.Resizing}
	if r.Job.TimeLimit > 0 {
		h.end, h.ends = r.Started.Add(r.Job.TimeLimit), true
		if h.end.Before(now) {
			h.end = now
		}
	}
	if r.Preempting {
		h.goAway(now)
	}
	if r.Resizing && r.ResizeTo > 0 && r.ResizeTo < workers && !h.going {
		kept, gone := h.split(r.ResizeTo)
		gone.goAway(now)
		gone.resizing = true
		return []holder{kept, gone}
	}
	return []holder{h}
}

// holderOf returns the holder of a job started in this decision.
func holderOf(r Running, now time.Time) holder { return holdersOf(r, now)[0] }

// split returns the holder of its first k workers, and that of the others.
func (h holder) split(k int) (kept, rest holder) {
	kept, rest = h.sized(k), h
	rest.workers = h.workers - k
	rest.milliCPU, rest.memory = mulSat(int64(rest.workers), h.per.milliCPU), mulSat(int64(rest.workers), h.per.memory)
	rest.gpus, rest.workerGPUs = nil, nil
	if len(h.workerGPUs) >= h.workers {
		rest.workerGPUs = h.workerGPUs[k:h.workers]
		rest.gpus = slices.Concat(rest.workerGPUs...)
	}
	return kept, rest
}

// sized returns the holder with only its first k workers.
func (h holder) sized(k int) holder {
	if k >= h.workers {
		return h
	}
	h.workers = k
	h.milliCPU, h.memory = mulSat(int64(k), h.per.milliCPU), mulSat(int64(k), h.per.memory)
	if len(h.workerGPUs) >= k {
		h.workerGPUs = h.workerGPUs[:k]
		h.gpus = slices.Concat(h.workerGPUs...)
	}
	return h
}

// goAway marks the job as being stopped: expected to end now.
func (h *holder) goAway(now time.Time) {
	h.going, h.end, h.ends = true, now, true
}

// freeGPUs returns the node's GPUs that none of the jobs holds, ascending.
func freeGPUs(n Node, jobs []holder) []int {
	held := make(map[int]bool)
	for _, h := range jobs {
		for _, g := range h.gpus {
			held[g] = true
		}
	}
	return slices.DeleteFunc(usableGPUs(n), func(g int) bool { return held[g] })
}

// leftOver returns what the node has left while the jobs run.
func leftOver(n Node, jobs []holder) amount {
	var cpu, mem int64
	for _, h := range jobs {
		cpu, mem = addSat(cpu, h.milliCPU), addSat(mem, h.memory)
	}
	c := capacity(n)
	return amount{gpus: int64(len(freeGPUs(n, jobs))), milliCPU: c.milliCPU - cpu, memory: c.memory - mem}
}

// expectedEnds returns the distinct expected end times of the jobs,
// earliest first. Jobs without a time limit have none.
func expectedEnds(jobs []holder) []time.Time {
	var ends []time.Time
	for _, h := range jobs {
		if h.ends {
			ends = append(ends, h.end)
		}
	}
	slices.SortFunc(ends, time.Time.Compare)
	return slices.CompactFunc(ends, time.Time.Equal)
}

// runningAfter returns the jobs expected to be still running at t: those
// that end after t, and those without a time limit.
func runningAfter(jobs []holder, t time.Time) []holder {
	var still []holder
	for _, h := range jobs {
		if !h.ends || h.end.After(t) {
			still = append(still, h)
		}
	}
	return still
}
