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
// started, and only as many as the head needs. It marks the newly chosen
// ones as going away (expected to end now, for the head's reservation),
// adds them to the decision's Preempt, and returns what the head's reason
// gains: "; preempting job lo (priority 0) to make room", or "" when the
// head counts on no job's end (it fits without, or it does not fit even
// with every job of lower priority gone).
func (sc *scheduler) preemptFor(head Job) string {
	if sc.policy != PreemptLowerPriority {
		return ""
	}
	need := demand(head)
	gone := make([]bool, len(sc.holders))
	fits := func() bool { return leftOver(sc.node, remaining(sc.holders, gone)).covers(need) }
	var chosen []int
	for _, i := range candidates(sc.holders, head.Priority) {
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
	for _, i := range chosen {
		h := &sc.holders[i]
		if h.going {
			continue
		}
		h.goAway(sc.now)
		sc.out.Preempt = append(sc.out.Preempt, Preemption{JobID: h.id, For: head.ID, ForPriority: head.Priority,
			Reason: fmt.Sprintf("preempted to make room for job %s (priority %d, higher than %d)", head.ID, head.Priority, h.priority)})
	}
	if len(chosen) == 0 {
		return ""
	}
	return "; " + preempting(sc.holders, chosen)
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

// remaining returns the jobs not gone.
func remaining(jobs []holder, gone []bool) []holder {
	var out []holder
	for i, h := range jobs {
		if !gone[i] {
			out = append(out, h)
		}
	}
	return out
}

// preempting says which jobs the head waits for: "preempting job lo (priority
// 0) to make room", "preempting jobs a (priority 0) and b (priority 1) to
// make room".
func preempting(jobs []holder, chosen []int) string {
	names := make([]string, len(chosen))
	for k, i := range chosen {
		names[k] = fmt.Sprintf("%s (priority %d)", jobs[i].id, jobs[i].priority)
	}
	if len(names) == 1 {
		return "preempting job " + names[0] + " to make room"
	}
	last := len(names) - 1
	return "preempting jobs " + strings.Join(names[:last], ", ") + " and " + names[last] + " to make room"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
