package scheduler

import "time"

// reservation is what the head of the queue, the first job in order that
// does not fit, is promised: the jobs that start ahead of it must not delay
// it. See the package documentation.
type reservation struct {
	// head is the job the reservation is for.
	head Job
	// at is the head's shadow time, if known is true: the earliest time it
	// fits if running jobs end when expected.
	at    time.Time
	known bool
	// extra is what later jobs may still take without delaying the head:
	// what is left at the shadow time once the head is placed or, if the
	// shadow time is unknown, what is free now beyond the head's need in
	// each resource where the head fits now.
	extra amount
}

// reserve makes the head's reservation, given the jobs holding resources
// and what is free now.
func reserve(n Node, jobs []holder, free amount, head Job) *reservation {
	need := demand(head)
	if at, left, ok := shadow(n, jobs, need); ok {
		return &reservation{head: head, at: at, known: true, extra: left.minus(need).atLeastZero()}
	}
	return &reservation{head: head, extra: free.minus(need).atLeastZero()}
}

// admit reports whether j, which fits now, may start ahead of the head. A
// job admitted because it fits within the extra resources uses them up, so
// that the next job cannot count on them too.
func (r *reservation) admit(j Job, now time.Time) bool {
	if r.known && j.TimeLimit > 0 && !now.Add(j.TimeLimit).After(r.at) {
		return true
	}
	need := demand(j)
	if !r.extra.covers(need) {
		return false
	}
	r.extra = r.extra.minus(need)
	return true
}

// shadow returns the earliest expected end of a running job after which a
// job needing need fits, and what is left at that time. ok is false if it
// does not fit even when every job with a time limit has ended.
func shadow(n Node, jobs []holder, need amount) (at time.Time, left amount, ok bool) {
	for _, t := range expectedEnds(jobs) {
		if left := leftOver(n, runningAfter(jobs, t)); left.covers(need) {
			return t, left, true
		}
	}
	return time.Time{}, amount{}, false
}
