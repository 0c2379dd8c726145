package scheduler

import (
	"slices"
	"time"
)

// holder is a job that holds resources on the node: one that was running
// already, or one started earlier in the same decision.
type holder struct {
	// gpus holds the GPUs of all its workers.
	gpus []int
	// milliCPU and memory are what all its workers asked for.
	milliCPU, memory int64
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
}

// holderOf returns what a running job holds and when it is expected to end.
func holderOf(r Running, now time.Time) holder {
	need := demand(r.Job)
	h := holder{gpus: slices.Concat(r.GPUs...), milliCPU: need.milliCPU, memory: need.memory,
		id: r.Job.ID, priority: r.Job.Priority, started: r.Started}
	if r.Job.TimeLimit > 0 {
		h.end, h.ends = r.Started.Add(r.Job.TimeLimit), true
		if h.end.Before(now) {
			h.end = now
		}
	}
	if r.Preempting {
		h.goAway(now)
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
