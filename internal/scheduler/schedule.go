package scheduler

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Schedule decides which queued jobs start now and where their workers go,
// and why each of the others waits. Jobs are taken by priority (higher
// first), then Seq (lower first), then ID; they start while they fit, and
// after the first that does not fit (the head), a job starts only if it
// does not delay the head. With State.Preemption PreemptLowerPriority, the
// head may have running jobs of lower priority preempted (Decision.Preempt)
// to make room for it. The package documentation gives the rules.
//
// Schedule is pure: it reads no clock, modifies neither s nor queue, and
// gives the same decision for the same input in any queue order. Job IDs
// should be unique: of several queued jobs with one ID only the first in
// order is considered, and a queued job whose ID is running waits.
func Schedule(s State, queue []Job) Decision {
	sc := newScheduler(s)
	seen := make(map[string]bool, len(queue))
	for _, j := range inOrder(queue) {
		if seen[j.ID] {
			continue
		}
		seen[j.ID] = true
		sc.consider(j)
	}
	sc.grow()
	return sc.out
}

// scheduler is one decision in progress.
type scheduler struct {
	node   Node
	now    time.Time
	policy PreemptionPolicy
	settle time.Duration
	// holders lists the running jobs, then the jobs started so far.
	holders []holder
	// free is what is left now; gpus lists the free GPUs, ascending.
	free amount
	gpus []int
	// running holds the IDs of the running jobs.
	running map[string]bool
	// head is the head's reservation, nil until a job does not fit.
	head *reservation
	out  Decision
}

// newScheduler returns a decision in progress for the state.
func newScheduler(s State) *scheduler {
	sc := &scheduler{node: s.Node, now: s.Now, policy: s.Preemption, settle: s.ElasticSettle, running: make(map[string]bool),
		out: Decision{Waiting: make(map[string]string)}}
	for _, r := range s.Running {
		for _, h := range holdersOf(r, s.Now) {
			h.existing = true
			sc.holders = append(sc.holders, h)
		}
		sc.running[r.Job.ID] = true
	}
	sc.gpus = freeGPUs(s.Node, sc.holders)
	sc.free = leftOver(s.Node, sc.holders)
	return sc
}

// consider starts j or records why it waits.
func (sc *scheduler) consider(j Job) {
	if sc.running[j.ID] {
		sc.out.Waiting[j.ID] = "a job with this ID is already running"
		return
	}
	if j.Elastic() {
		sc.considerElastic(j)
		return
	}
	if err := CheckFits(sc.node, j); err != nil {
		sc.out.Waiting[j.ID] = "can never run here: " + err.Error()
		return
	}
	need := demand(j)
	switch {
	case !sc.free.covers(need):
		why := shortfall(need, sc.free)
		if sc.head == nil {
			why += sc.preemptFor(j)
			sc.head = reserve(sc.node, sc.holders, sc.free, j)
		}
		sc.out.Waiting[j.ID] = why
	case sc.head == nil || sc.head.admit(j, sc.now):
		sc.start(j)
	default:
		sc.out.Waiting[j.ID] = behind(sc.head.head, j)
	}
}

// start places j's workers on the lowest free GPUs and counts j as running
// from now on.
func (sc *scheduler) start(j Job) {
	p := Placement{JobID: j.ID, GPUs: make([][]int, j.Workers)}
	for w := range p.GPUs {
		n := j.PerWorker.GPUs
		p.GPUs[w] = make([]int, n)
		copy(p.GPUs[w], sc.gpus[:n])
		sc.gpus = sc.gpus[n:]
	}
	sc.out.Start = append(sc.out.Start, p)
	sc.holders = append(sc.holders, holderOf(Running{Job: j, GPUs: p.GPUs, Started: sc.now, Workers: j.Workers}, sc.now))
	sc.free = sc.free.minus(demand(j))
}

// inOrder returns a copy of the queue in scheduling order: priority
// descending, then Seq ascending, then ID.
func inOrder(queue []Job) []Job {
	jobs := slices.Clone(queue)
	slices.SortStableFunc(jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Seq, b.Seq), strings.Compare(a.ID, b.ID))
	})
	return jobs
}
