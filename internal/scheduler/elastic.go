package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// considerElastic starts an elastic job j with as many of its workers as fit, the most
// when they all do, or at least its MinWorkers once it has waited State.ElasticSettle
// for more; or records why it waits. One that fits with fewer than all and still settles
// is the head: what fits now is kept for it.
func (sc *scheduler) considerElastic(j Job) {
	least := j.atSize(j.MinWorkers)
	if err := CheckFits(sc.node, least); err != nil {
		sc.out.Waiting[j.ID] = "can never run here, even with its fewest workers: " + err.Error()
		return
	}
	k := sc.mostThatFit(j)
	switch {
	case k == j.Workers || (k >= j.MinWorkers && sc.settled(j)):
		sc.start(j.atSize(k))
	case k >= j.MinWorkers:
		sc.out.Waiting[j.ID] = fmt.Sprintf("%d of its %d workers fit; waiting up to %s for room for more (--elastic-settle)",
			k, j.Workers, (sc.settle - sc.now.Sub(j.Queued)).Round(100_000_000))
		if sc.head == nil {
			sc.head = reserve(sc.node, sc.holders, sc.free, j.atSize(k))
		}
	case sc.free.covers(demand(least)): // it fits, but not ahead of the head
		sc.out.Waiting[j.ID] = behind(sc.head.head, j)
	default:
		why := shortfall(demand(least), sc.free) + fmt.Sprintf(" (its fewest workers, %d of %d)", j.MinWorkers, j.Workers)
		if sc.head == nil {
			why += sc.preemptFor(least)
			sc.head = reserve(sc.node, sc.holders, sc.free, least)
		}
		sc.out.Waiting[j.ID] = why
	}
}

// mostThatFit returns the most workers of j, down to its MinWorkers, that fit now and
// do not delay the head (admitting them uses up what the head leaves); 0 when not even
// MinWorkers do.
func (sc *scheduler) mostThatFit(j Job) int {
	for k := j.Workers; k >= j.MinWorkers; k-- {
		jk := j.atSize(k)
		if sc.free.covers(demand(jk)) && (sc.head == nil || sc.head.admit(jk, sc.now)) {
			return k
		}
	}
	return 0
}

// settled reports whether the elastic job has waited State.ElasticSettle for room.
func (sc *scheduler) settled(j Job) bool {
	return j.Queued.IsZero() || sc.now.Sub(j.Queued) >= sc.settle
}

// shrinkable reports whether the holder is an elastic gang that may be shrunk for a
// head: above its fewest workers, and neither going away nor resizing already.
func (h holder) shrinkable() bool {
	return h.existing && !h.going && !h.resizing && h.workers > h.min
}

// shrink decides that holder i runs with k workers to make room for head: the workers
// from k on go away (a holder of their own, expected to end now), and the job is in the
// decision's Resize.
func (sc *scheduler) shrink(i, k int, head Job) {
	h := sc.holders[i]
	kept, rest := h.split(k)
	kept.resizing, rest.resizing = true, true
	rest.goAway(sc.now)
	sc.holders[i] = kept
	sc.holders = append(sc.holders, rest)
	sc.out.Resize = append(sc.out.Resize, Resize{JobID: h.id, From: h.workers, To: k, GPUs: kept.workerGPUs,
		For: head.ID, ForName: head.Name, ForPriority: head.Priority,
		Reason: fmt.Sprintf("to make room for job %s (priority %d, higher than %d)", head.Label(), head.Priority, h.priority)})
}

// grow gives the running elastic gangs below their most workers the room that no queued
// job waits for (there is no head): the highest priority first, then the earliest
// started, each as many more workers as fit, on the lowest free GPUs.
func (sc *scheduler) grow() {
	if sc.head != nil {
		return
	}
	var order []int
	for i, h := range sc.holders {
		if h.existing && !h.going && !h.resizing && h.workers < h.max && len(h.workerGPUs) == h.workers {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := sc.holders[a], sc.holders[b]
		return cmp.Or(cmp.Compare(y.priority, x.priority), x.started.Compare(y.started), strings.Compare(x.id, y.id))
	})
	for _, i := range order {
		h := &sc.holders[i]
		more := 0
		for more < h.max-h.workers && sc.free.covers(amount{gpus: h.per.gpus * int64(more+1),
			milliCPU: h.per.milliCPU * int64(more+1), memory: h.per.memory * int64(more+1)}) {
			more++
		}
		if more == 0 {
			continue
		}
		gpus := slices.Clone(h.workerGPUs)
		var added []int
		for range more {
			n := int(h.per.gpus)
			w := make([]int, n)
			copy(w, sc.gpus[:n])
			sc.gpus = sc.gpus[n:]
			gpus = append(gpus, w)
			added = append(added, w...)
		}
		sc.out.Resize = append(sc.out.Resize, Resize{JobID: h.id, From: h.workers, To: h.workers + more, GPUs: gpus,
			Reason: roomFor(added, more, h.per)})
		sc.free = sc.free.minus(amount{gpus: h.per.gpus * int64(more), milliCPU: h.per.milliCPU * int64(more),
			memory: h.per.memory * int64(more)})
		h.workerGPUs, h.gpus, h.workers, h.resizing = gpus, slices.Concat(gpus...), h.workers+more, true
	}
}

// roomFor says what room a grow uses: "GPUs 2,3 free", "room for 2 more workers free".
func roomFor(gpus []int, workers int, per amount) string {
	if len(gpus) > 0 {
		ids := make([]string, len(gpus))
		for i, g := range gpus {
			ids[i] = strconv.Itoa(g)
		}
		return plural(int64(len(gpus)), "GPU")[len(strconv.Itoa(len(gpus)))+1:] + " " + strings.Join(ids, ",") + " free"
	}
	if per.milliCPU > 0 {
		return fmt.Sprintf("%s free for %s", cpus(per.milliCPU*int64(workers)), plural(int64(workers), "more worker"))
	}
	return fmt.Sprintf("room for %s", plural(int64(workers), "more worker"))
}
