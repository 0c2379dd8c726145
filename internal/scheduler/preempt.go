package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// preemptFor chooses the running jobs whose end lets the head fit, when the
// policy allows preemption: jobs of strictly lower priority, those already
// going away first, then the lowest priority, then the most recently
// started, and only as many as the head needs. Elastic gangs above their
// MinWorkers are shrunk toward it first, in the same order, and preempted
// whole only when shrinking every candidate is not enough. It marks the
// newly chosen ones as going away (expected to end now, for the head's
// reservation), adds them to the decision's Preempt (and the shrinks to its
// Resize), and returns what the head's reason gains: "; preempting job lo
// (priority 0) to make room", or "" when the head counts on no job's end
// (it fits without, or it does not fit even with every job of lower
// priority gone).
func (sc *scheduler) preemptFor(head Job) string {
	if sc.policy != PreemptLowerPriority {
		return ""
	}
	need := demand(head)
	gone := make([]bool, len(sc.holders))
	size := make([]int, len(sc.holders))
	for i, h := range sc.holders {
		size[i] = h.workers
	}
	fits := func() bool { return leftOver(sc.node, remaining(sc.holders, gone, size)).covers(need) }
	cands := candidates(sc.holders, head.Priority)
	var shrunk, chosen []int
	for _, i := range cands {
		if fits() {
			break
		}
		if h := sc.holders[i]; h.shrinkable() {
			size[i] = h.min
			shrunk = append(shrunk, i)
		}
	}
	// Preempt whole, in the same order, but the shrunk gangs last: what they keep is
	// their fewest workers.
	for _, i := range slices.Concat(slices.DeleteFunc(slices.Clone(cands), func(i int) bool { return slices.Contains(shrunk, i) }), shrunk) {
		if fits() {
			break
		}
		gone[i] = true
		chosen = append(chosen, i)
	}
	if !fits() {
		return ""
	}
	// Keep only the jobs the head needs gone, trying the last chosen first
	// (Kueue's minimal preemptions): each one kept is needed by the others
	// kept, and stays needed as later ones are dropped, since fewer jobs gone
	// never frees more.
	for _, i := range slices.Backward(chosen) {
		gone[i] = false
		if !fits() {
			gone[i] = true
		}
	}
	chosen = slices.DeleteFunc(chosen, func(i int) bool { return !gone[i] })
	// Then give each shrunk gang back as many workers as the head leaves it,
	// the last shrunk first.
	for _, i := range slices.Backward(shrunk) {
		if gone[i] {
			continue
		}
		for k := sc.holders[i].workers; k > sc.holders[i].min; k-- {
			if size[i] = k; fits() {
				break
			}
			size[i] = sc.holders[i].min
		}
	}
	shrunk = slices.DeleteFunc(shrunk, func(i int) bool { return gone[i] || size[i] >= sc.holders[i].workers })
	for _, i := range chosen {
		h := &sc.holders[i]
		if h.going {
			continue
		}
		h.goAway(sc.now)
		sc.out.Preempt = append(sc.out.Preempt, Preemption{JobID: h.id, For: head.ID, ForName: head.Name, ForPriority: head.Priority,
			Reason: fmt.Sprintf("preempted to make room for job %s (priority %d, higher than %d)", head.Label(), head.Priority, h.priority)})
	}
	if len(chosen) == 0 && len(shrunk) == 0 {
		return ""
	}
	why := "; " + preempting(sc.holders, chosen, shrunk, size)
	for _, i := range shrunk {
		sc.shrink(i, size[i], head)
	}
	return why
}

// candidates returns the indices of the jobs that may be preempted for a job
// of priority p, in the order they are chosen: those already going away
// (they cost nothing more), then priority ascending, then the most recently
// started first (it loses the least work), then ID. Jobs started in this
// decision came before the head in order, so their priority is never lower.
func candidates(jobs []holder, p int) []int {
	var out []int
	for i, h := range jobs {
		if h.priority < p {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b int) int {
		x, y := jobs[a], jobs[b]
		return cmp.Or(-cmp.Compare(boolInt(x.going), boolInt(y.going)), cmp.Compare(x.priority, y.priority),
			y.started.Compare(x.started), strings.Compare(x.id, y.id))
	})
	return out
}

// remaining returns the jobs not gone, each with only its first size[i]
// workers.
func remaining(jobs []holder, gone []bool, size []int) []holder {
	var out []holder
	for i, h := range jobs {
		if !gone[i] {
			out = append(out, h.sized(size[i]))
		}
	}
	return out
}

// preempting says which jobs the head waits for: "preempting job lo (priority
// 0) to make room", "preempting jobs a (priority 0) and b (priority 1) to
// make room", "shrinking job e (priority 0) from 4 to 2 workers to make
// room". The shrunk jobs' sizes are those before the shrink (size gives the
// new ones), as the holders were split already.
func preempting(jobs []holder, chosen, shrunk []int, size []int) string {
	var parts []string
	if len(chosen) > 0 {
		names := make([]string, len(chosen))
		for k, i := range chosen {
			names[k] = fmt.Sprintf("%s (priority %d)", jobs[i].id, jobs[i].priority)
			if jobs[i].going && jobs[i].resizing {
				names[k] = fmt.Sprintf("%s (priority %d, shrinking)", jobs[i].id, jobs[i].priority)
			}
		}
		parts = append(parts, "preempting "+jobList(names))
	}
	if len(shrunk) > 0 {
		names := make([]string, len(shrunk))
		for k, i := range shrunk {
			names[k] = fmt.Sprintf("%s (priority %d) from %d to %d workers", jobs[i].id, jobs[i].priority,
				jobs[i].workers, size[i])
		}
		parts = append(parts, "shrinking "+jobList(names))
	}
	return strings.Join(parts, " and ") + " to make room"
}

// jobList names one or more jobs: "job a", "jobs a, b and c".
func jobList(names []string) string {
	if len(names) == 1 {
		return "job " + names[0]
	}
	last := len(names) - 1
	return "jobs " + strings.Join(names[:last], ", ") + " and " + names[last]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
