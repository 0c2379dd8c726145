package scheduler

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// propertyStats counts what the random cases exercised, so that a change to
// the generator cannot quietly stop testing backfill.
type propertyStats struct {
	heads, knownShadow, unknownShadow, backfilledKnown, backfilledUnknown, neverFits int
	preempted, headsCountingOnGoing, backfilledBesidePreemption                      int
}

// TestScheduleProperties checks, over random states and queues, what must
// hold for every decision: no GPU is given twice, CPU and memory stay within
// the node, every started job could start, every queued job is answered
// once, the decision does not depend on the queue's order nor change its
// input, backfilled jobs never delay the head, and running jobs are
// preempted only for the head, only of lower priority, and only as many as
// it needs.
func TestScheduleProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 3))
	var stats propertyStats
	for i := range 4000 {
		s, queue := randomCase(r)
		sCopy, queueCopy := cloneState(s), slices.Clone(queue)
		d := Schedule(s, queue)
		if diff := gocmp.Diff(sCopy, s); diff != "" {
			t.Errorf("Schedule changed its state (-before +after):\n%s", diff)
		}
		if diff := gocmp.Diff(queueCopy, queue); diff != "" {
			t.Errorf("Schedule changed its queue (-before +after):\n%s", diff)
		}
		shuffled := slices.Clone(queue)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if diff := gocmp.Diff(d, Schedule(s, shuffled)); diff != "" {
			t.Errorf("Schedule depends on the queue's order (-in order +shuffled):\n%s", diff)
		}
		checkAnswered(t, queue, d)
		checkPlacements(t, s, queue, d)
		checkHead(t, s, queue, d, &stats)
		checkPreemption(t, s, queue, d, &stats)
		if t.Failed() {
			t.Fatalf("case %d:\nstate: %+v\nqueue: %+v\ndecision: %+v", i, s, queue, d)
		}
	}
	t.Logf("%+v", stats)
	for name, n := range map[string]int{
		"heads": stats.heads, "known shadow times": stats.knownShadow, "unknown shadow times": stats.unknownShadow,
		"backfills with a known shadow time":    stats.backfilledKnown,
		"backfills with an unknown shadow time": stats.backfilledUnknown, "never-fitting jobs": stats.neverFits,
		"preempted jobs": stats.preempted, "heads counting on jobs already going away": stats.headsCountingOnGoing,
		"backfills beside a preemption": stats.backfilledBesidePreemption,
	} {
		if n < 50 {
			t.Errorf("only %d %s in 4000 cases; the generator no longer exercises them", n, name)
		}
	}
}

// checkAnswered checks that every queued job is started or waiting, once,
// with a reason of a known kind.
func checkAnswered(t *testing.T, queue []Job, d Decision) {
	t.Helper()
	seen := make(map[string]int)
	for _, p := range d.Start {
		seen[p.JobID]++
	}
	for id, why := range d.Waiting {
		seen[id]++
		if !strings.HasPrefix(why, "needs ") && !strings.HasPrefix(why, "waiting behind job ") &&
			!strings.HasPrefix(why, "can never run here: ") {
			t.Errorf("job %s waits for an unexpected reason: %q", id, why)
		}
	}
	for _, j := range queue {
		if seen[j.ID] != 1 {
			t.Errorf("job %s is answered %d times, want 1", j.ID, seen[j.ID])
		}
		delete(seen, j.ID)
	}
	for id := range seen {
		t.Errorf("job %s is answered but not queued", id)
	}
}

// checkPlacements checks that started jobs could run here, that their
// workers got the GPUs they asked for, free and disjoint, and that CPU and
// memory stay within the node.
func checkPlacements(t *testing.T, s State, queue []Job, d Decision) {
	t.Helper()
	owner := make(map[int]string)
	var cpu, mem int64
	take := func(id string, w int, gpus []int) {
		for _, g := range gpus {
			if prev, taken := owner[g]; taken {
				t.Errorf("GPU %d given to %s worker %d and to %s", g, id, w, prev)
			}
			owner[g] = fmt.Sprintf("%s worker %d", id, w)
			if !slices.Contains(s.Node.GPUs, g) {
				t.Errorf("%s worker %d got GPU %d, which the node does not offer", id, w, g)
			}
		}
	}
	for _, r := range s.Running {
		for w, gpus := range r.GPUs {
			take(r.Job.ID, w, gpus)
		}
		cpu, mem = cpu+total(r.Job).MilliCPU, mem+total(r.Job).MemoryBytes
	}
	for _, p := range d.Start {
		j := findJob(queue, p.JobID)
		if err := CheckFits(s.Node, j); err != nil {
			t.Errorf("started job %s can never fit: %v", j.ID, err)
		}
		if len(p.GPUs) != j.Workers {
			t.Errorf("job %s has %d workers, placement has %d", j.ID, j.Workers, len(p.GPUs))
		}
		for w, gpus := range p.GPUs {
			if gpus == nil || len(gpus) != j.PerWorker.GPUs {
				t.Errorf("job %s worker %d got GPUs %v, want %d", j.ID, w, gpus, j.PerWorker.GPUs)
			}
			take(j.ID, w, gpus)
		}
		cpu, mem = cpu+total(j).MilliCPU, mem+total(j).MemoryBytes
	}
	if cpu > s.Node.MilliCPU || mem > s.Node.MemoryBytes {
		t.Errorf("jobs use %d millicores and %d bytes, node has %d and %d", cpu, mem, s.Node.MilliCPU, s.Node.MemoryBytes)
	}
}

// checkHead checks that jobs start in order until the head, which does not
// fit, and that the jobs started after it do not delay it: its shadow time
// does not grow, and when it has none, whatever running jobs end, the head
// fits with the backfilled jobs whenever it fits without them.
func checkHead(t *testing.T, s State, queue []Job, d Decision, stats *propertyStats) {
	t.Helper()
	order, started := testOrder(s.Node, queue, stats), make(map[string]bool)
	for _, p := range d.Start {
		started[p.JobID] = true
	}
	var chosen []string
	for _, j := range order {
		if started[j.ID] {
			chosen = append(chosen, j.ID)
		}
	}
	var got []string
	for _, p := range d.Start {
		got = append(got, p.JobID)
	}
	if diff := gocmp.Diff(chosen, got); diff != "" {
		t.Errorf("jobs did not start in order (-want +got):\n%s", diff)
	}
	h := slices.IndexFunc(order, func(j Job) bool { return !started[j.ID] })
	if h < 0 {
		return
	}
	stats.heads++
	head, before, backfilled := order[h], slices.Clone(s.Running), []Running(nil)
	for i, r := range before { // the jobs preempted for the head are going away
		if slices.ContainsFunc(d.Preempt, func(p Preemption) bool { return p.JobID == r.Job.ID }) {
			before[i].Preempting = true
		}
	}
	for i, j := range order {
		if started[j.ID] {
			run := Running{Job: j, GPUs: findPlacement(d, j.ID).GPUs, Started: s.Now}
			if i < h {
				before = append(before, run)
			} else {
				backfilled = append(backfilled, run)
			}
		}
	}
	if fitsBeside(s.Node, before, head) {
		t.Errorf("head %s fits but waits: %s", head.ID, d.Waiting[head.ID])
	}
	checkNotDelayed(t, s, head, before, backfilled, stats)
}

// checkNotDelayed checks that the backfilled jobs do not delay the head.
func checkNotDelayed(t *testing.T, s State, head Job, before, backfilled []Running, stats *propertyStats) {
	t.Helper()
	with := slices.Concat(before, backfilled)
	was, known := earliestStart(s, before, head)
	if known {
		stats.knownShadow++
		stats.backfilledKnown += len(backfilled)
		is, ok := earliestStart(s, with, head)
		if !ok || is.After(was) {
			t.Errorf("backfilled jobs delay head %s: shadow time was %v, is %v (known %v)", head.ID, was, is, ok)
		}
		return
	}
	stats.unknownShadow++
	stats.backfilledUnknown += len(backfilled)
	for ended := range 1 << len(before) {
		var still []Running
		for i, r := range before {
			if ended&(1<<i) == 0 {
				still = append(still, r)
			}
		}
		if fitsBeside(s.Node, still, head) && !fitsBeside(s.Node, slices.Concat(still, backfilled), head) {
			t.Errorf("head %s without a shadow time fits once %d of %d running jobs end, but not beside the backfilled ones",
				head.ID, len(before)-len(still), len(before))
		}
	}
}

// earliestStart returns the earliest time, Now or a running job's expected
// end, at which j fits if the jobs end when expected: jobs being stopped
// now, and jobs without a time limit never.
func earliestStart(s State, jobs []Running, j Job) (time.Time, bool) {
	ends := func(r Running) bool { return r.Preempting || r.Job.TimeLimit > 0 }
	end := func(r Running) time.Time {
		if e := r.Started.Add(r.Job.TimeLimit); e.After(s.Now) && !r.Preempting {
			return e
		}
		return s.Now
	}
	times := []time.Time{s.Now}
	for _, r := range jobs {
		if ends(r) {
			times = append(times, end(r))
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	for _, at := range times {
		still := slices.DeleteFunc(slices.Clone(jobs), func(r Running) bool {
			return ends(r) && !end(r).After(at)
		})
		if fitsBeside(s.Node, still, j) {
			return at, true
		}
	}
	return time.Time{}, false
}

// fitsBeside reports whether j fits on the node while the jobs run.
func fitsBeside(n Node, jobs []Running, j Job) bool {
	held := make(map[int]bool)
	var cpu, mem int64
	for _, r := range jobs {
		for _, gpus := range r.GPUs {
			for _, g := range gpus {
				held[g] = true
			}
		}
		cpu, mem = cpu+total(r.Job).MilliCPU, mem+total(r.Job).MemoryBytes
	}
	free := 0
	for _, g := range n.GPUs {
		if !held[g] {
			free++
		}
	}
	need := total(j)
	return need.GPUs <= free && cpu+need.MilliCPU <= n.MilliCPU && mem+need.MemoryBytes <= n.MemoryBytes
}

// testOrder returns the queued jobs that can ever fit, in the order the
// package documentation gives.
func testOrder(n Node, queue []Job, stats *propertyStats) []Job {
	var order []Job
	for _, j := range queue {
		if CheckFits(n, j) == nil {
			order = append(order, j)
		} else {
			stats.neverFits++
		}
	}
	slices.SortFunc(order, func(a, b Job) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), strings.Compare(a.ID, b.ID))
	})
	return order
}

// total returns what all of a job's workers ask for together.
func total(j Job) Resources {
	w := j.Workers
	return Resources{GPUs: w * j.PerWorker.GPUs, MilliCPU: int64(w) * j.PerWorker.MilliCPU,
		MemoryBytes: int64(w) * j.PerWorker.MemoryBytes}
}

// findJob returns the queued job with the ID.
func findJob(queue []Job, id string) Job {
	return queue[slices.IndexFunc(queue, func(j Job) bool { return j.ID == id })]
}

// findPlacement returns the placement of the job with the ID.
func findPlacement(d Decision, id string) Placement {
	return d.Start[slices.IndexFunc(d.Start, func(p Placement) bool { return p.JobID == id })]
}

// randomCase returns a node with up to 8 GPUs (not always numbered from 0),
// up to 5 jobs running on it within its capacity (one in six being stopped),
// and up to 8 queued jobs; one case in two allows preemption.
// Times are in steps of 10 minutes so that expected ends often coincide.
func randomCase(r *rand.Rand) (State, []Job) {
	s := State{
		Node: Node{MilliCPU: int64(r.IntN(8)+1) * 8000, MemoryBytes: int64(r.IntN(8)+1) * 32 * gib1},
		Now:  now.Add(time.Duration(r.IntN(1000)) * time.Minute),
	}
	for g := range 8 {
		if r.IntN(5) > 0 {
			s.Node.GPUs = append(s.Node.GPUs, g)
		}
	}
	r.Shuffle(len(s.Node.GPUs), func(a, b int) { s.Node.GPUs[a], s.Node.GPUs[b] = s.Node.GPUs[b], s.Node.GPUs[a] })
	if r.IntN(2) == 0 {
		s.Preemption = PreemptLowerPriority
	}
	for i := range r.IntN(6) {
		j := randomJob(r, fmt.Sprintf("r%d", i))
		j.Priority = r.IntN(3)
		if gpus, ok := placeRandomly(r, s, j); ok {
			started := s.Now.Add(-time.Duration(r.IntN(30)) * 10 * time.Minute)
			s.Running = append(s.Running, Running{Job: j, GPUs: gpus, Started: started, Preempting: r.IntN(6) == 0})
		}
	}
	queue := make([]Job, r.IntN(9))
	for i := range queue {
		queue[i] = randomJob(r, fmt.Sprintf("q%d", i))
		queue[i].Priority, queue[i].Seq = r.IntN(3), uint64(r.IntN(6))
	}
	return s, queue
}

// randomJob returns a job of 1 to 3 workers, each asking for 0 to 3 GPUs, 0
// to 12 cores and 0 to 64 GiB, with a time limit two times in three.
func randomJob(r *rand.Rand, id string) Job {
	j := Job{ID: id, Workers: r.IntN(3) + 1, PerWorker: Resources{
		GPUs: r.IntN(4), MilliCPU: int64(r.IntN(13)) * 1000, MemoryBytes: int64(r.IntN(5)) * 16 * gib1,
	}}
	if r.IntN(3) > 0 {
		j.TimeLimit = time.Duration(r.IntN(30)+1) * 10 * time.Minute
	}
	return j
}

// placeRandomly gives j's workers random free GPUs, if j fits beside the
// running jobs.
func placeRandomly(r *rand.Rand, s State, j Job) ([][]int, bool) {
	if !fitsBeside(s.Node, s.Running, j) {
		return nil, false
	}
	free := slices.Clone(s.Node.GPUs)
	for _, run := range s.Running {
		for _, gpus := range run.GPUs {
			free = slices.DeleteFunc(free, func(g int) bool { return slices.Contains(gpus, g) })
		}
	}
	r.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	gpus := make([][]int, j.Workers)
	for w := range gpus {
		gpus[w], free = free[:j.PerWorker.GPUs:j.PerWorker.GPUs], free[j.PerWorker.GPUs:]
	}
	return gpus, true
}

// cloneState returns a deep copy of s.
func cloneState(s State) State {
	c := s
	c.Node.GPUs = slices.Clone(s.Node.GPUs)
	c.Running = slices.Clone(s.Running)
	for i, r := range s.Running {
		c.Running[i].GPUs = make([][]int, len(r.GPUs))
		for w, gpus := range r.GPUs {
			c.Running[i].GPUs[w] = slices.Clone(gpus)
		}
	}
	return c
}
