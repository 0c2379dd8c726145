package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// preemptive returns the state with the lower-priority preemption policy.
func preemptive(s State) State {
	s.Preemption = PreemptLowerPriority
	return s
}

// stopping returns the running job as one being stopped (Running.Preempting).
func stopping(r Running) Running {
	r.Preempting = true
	return r
}

// makeRoom is a Preemption of job id for job head of priority p, the victim of
// priority victim.
func makeRoom(id, head string, p, victim int) Preemption {
	return Preemption{JobID: id, For: head, ForPriority: p,
		Reason: fmt.Sprintf("preempted to make room for job %s (priority %d, higher than %d)", head, p, victim)}
}

func TestSchedulePreemption(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	lo := job("lo").gpus(4).running(ago(time.Hour), []int{0, 1, 2, 3})
	cases := map[string]struct {
		state State
		queue []Job
		want  Decision
	}{
		"a higher-priority head preempts a lower-priority job": {
			state: preemptive(state(n, lo)),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free; preempting job lo (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("lo", "hi", 5, 0)},
			},
		},
		"the policy never preempts nothing": {
			state: func() State { s := state(n, lo); s.Preemption = PreemptNever; return s }(),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want:  Decision{Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free"}},
		},
		"the zero policy preempts nothing": {
			state: state(n, lo),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want:  Decision{Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free"}},
		},
		"equal priority is never preempted": {
			state: preemptive(state(n, job("lo").gpus(4).priority(5).running(ago(time.Hour), []int{0, 1, 2, 3}))),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want:  Decision{Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free"}},
		},
		"higher priority is never preempted": {
			state: preemptive(state(n, job("top").gpus(4).priority(9).running(ago(time.Hour), []int{0, 1, 2, 3}))),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want:  Decision{Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free"}},
		},
		"lowest priority first": {
			state: preemptive(state(n,
				job("one").gpus(2).priority(1).running(ago(time.Hour), []int{0, 1}),
				job("zero").gpus(2).running(ago(2*time.Hour), []int{2, 3}))),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free; preempting job zero (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("zero", "hi", 5, 0)},
			},
		},
		"the most recently started first among equal priority": {
			state: preemptive(state(n,
				job("new").gpus(2).running(ago(time.Minute), []int{0, 1}),
				job("old").gpus(2).running(ago(time.Hour), []int{2, 3}))),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free; preempting job new (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("new", "hi", 5, 0)},
			},
		},
		"only as many as the head needs": {
			state: preemptive(state(n,
				job("a").gpus(1).running(ago(3*time.Minute), []int{0}),
				job("b").gpus(1).running(ago(2*time.Minute), []int{1}),
				job("c").gpus(1).running(ago(time.Minute), []int{2}))),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 2 GPUs, 1 free; preempting job c (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("c", "hi", 5, 0)},
			},
		},
		"a job chosen first is left when a later one suffices alone": {
			state: preemptive(state(n,
				job("small").gpus(1).running(ago(time.Minute), []int{0}),
				job("big").gpus(3).running(ago(time.Hour), []int{1, 2, 3}))),
			queue: []Job{job("hi").gpus(3).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 3 GPUs, 0 free; preempting job big (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("big", "hi", 5, 0)},
			},
		},
		"several jobs when one is not enough": {
			state: preemptive(state(n,
				job("a").gpus(2).running(ago(time.Hour), []int{0, 1}),
				job("b").gpus(2).priority(1).running(ago(time.Hour), []int{2, 3}))),
			queue: []Job{job("hi").gpus(4).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 4 GPUs, 0 free; preempting jobs a (priority 0) and b (priority 1) to make room"},
				Preempt: []Preemption{makeRoom("a", "hi", 5, 0), makeRoom("b", "hi", 5, 1)},
			},
		},
		"CPU and memory count too": {
			state: preemptive(state(n,
				job("cpu").cpus(24).running(ago(time.Minute)),
				job("mem").memGiB(200).running(ago(time.Minute)),
				job("gpu").gpus(1).running(now, []int{0}))),
			queue: []Job{job("hi").cpus(16).memGiB(100).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 16 CPUs, 8 free; needs 100 GiB of memory, 56 GiB free; " +
					"preempting jobs cpu (priority 0) and mem (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("cpu", "hi", 5, 0), makeRoom("mem", "hi", 5, 0)},
			},
		},
		"nothing is preempted for a head that would not fit even then": {
			state: preemptive(state(n,
				job("top").gpus(2).priority(9).running(ago(time.Hour), []int{0, 1}),
				job("lo").gpus(2).running(ago(time.Hour), []int{2, 3}))),
			queue: []Job{job("hi").gpus(4).priority(5).obj()},
			want:  Decision{Waiting: map[string]string{"hi": "needs 4 GPUs, 0 free"}},
		},
		"nothing is preempted for a job that can never fit": {
			state: preemptive(state(n, lo)),
			queue: []Job{job("huge").gpus(8).priority(9).obj()},
			want:  Decision{Waiting: map[string]string{"huge": "can never run here: the job needs 8 GPUs (1 worker x 8) but this machine has 4"}},
		},
		"only the head preempts": {
			state: preemptive(state(n, lo)),
			queue: []Job{job("hi1").gpus(4).priority(5).seq(1).obj(), job("hi2").gpus(4).priority(5).seq(2).obj()},
			want: Decision{
				Waiting: map[string]string{
					"hi1": "needs 4 GPUs, 0 free; preempting job lo (priority 0) to make room",
					"hi2": "needs 4 GPUs, 0 free",
				},
				Preempt: []Preemption{makeRoom("lo", "hi1", 5, 0)},
			},
		},
		"a job being preempted is not chosen again": {
			state: preemptive(state(n, stopping(lo))),
			queue: []Job{job("hi").gpus(4).priority(5).obj()},
			want:  Decision{Waiting: map[string]string{"hi": "needs 4 GPUs, 0 free; preempting job lo (priority 0) to make room"}},
		},
		"a job being preempted counts as going away, first": {
			state: preemptive(state(n,
				stopping(job("going").gpus(1).running(ago(time.Hour), []int{0})),
				job("lo").gpus(1).running(ago(time.Hour), []int{1}),
				job("newer").gpus(1).running(ago(time.Minute), []int{2}),
				job("top").gpus(1).priority(9).running(ago(time.Hour), []int{3}))),
			queue: []Job{job("hi").gpus(2).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free; preempting jobs going (priority 0) and newer (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("newer", "hi", 5, 0)},
			},
		},
		"a backfill with a time limit does not take what a preempted job frees": {
			// Without preemption the head's shadow time is lo's expected end, in an
			// hour, and a one-minute job would backfill the two free GPUs.
			state: preemptive(state(n, job("lo").gpus(2).limit(2*time.Hour).running(ago(time.Hour), []int{0, 1}))),
			queue: []Job{job("hi").gpus(4).priority(5).obj(), job("short").gpus(2).limit(time.Minute).priority(1).obj()},
			want: Decision{
				Waiting: map[string]string{
					"hi":    "needs 4 GPUs, 2 free; preempting job lo (priority 0) to make room",
					"short": "waiting behind job hi (priority 5, higher than 1)",
				},
				Preempt: []Preemption{makeRoom("lo", "hi", 5, 0)},
			},
		},
		"a job that leaves the head room still backfills": {
			state: preemptive(state(n, job("lo").gpus(2).cpus(4).running(ago(time.Hour), []int{0, 1}))),
			queue: []Job{job("hi").gpus(4).cpus(8).priority(5).obj(), job("cpu").cpus(16).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "cpu", GPUs: gpus([]int{})}},
				Waiting: map[string]string{"hi": "needs 4 GPUs, 2 free; preempting job lo (priority 0) to make room"},
				Preempt: []Preemption{makeRoom("lo", "hi", 5, 0)},
			},
		},
		"the head starts once its preempted jobs are gone": {
			state: preemptive(state(n, job("other").gpus(1).priority(9).running(ago(time.Hour), []int{0}))),
			queue: []Job{job("hi").gpus(3).priority(5).obj(), job("lo").gpus(4).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "hi", GPUs: gpus([]int{1, 2, 3})}},
				Waiting: map[string]string{"lo": "needs 4 GPUs, 0 free"},
			},
		},
		"jobs started in this decision are never preempted": {
			state: preemptive(state(n)),
			queue: []Job{job("first").gpus(3).priority(9).obj(), job("hi").gpus(2).priority(5).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "first", GPUs: gpus([]int{0, 1, 2})}},
				Waiting: map[string]string{"hi": "needs 2 GPUs, 1 free"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Schedule(tc.state, tc.queue)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePreemptionPolicy(t *testing.T) {
	for _, s := range []string{"lower-priority", "never"} {
		if p, err := ParsePreemptionPolicy(s); err != nil || string(p) != s {
			t.Errorf("ParsePreemptionPolicy(%q) = %q, %v", s, p, err)
		}
	}
	_, err := ParsePreemptionPolicy("always")
	if err == nil || err.Error() != `unknown preemption policy "always": want lower-priority or never` {
		t.Errorf("ParsePreemptionPolicy(always): %v", err)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("the error wraps %v", errors.Unwrap(err))
	}
}

// checkPreemption checks the running jobs a decision preempts: none without
// the policy or without a head; each one running, not already being stopped,
// of lower priority than the head it makes room for, and named once; the
// head fits once they and the lower-priority jobs already going away are
// gone, and no longer fits if any one of them stays; and jobs are preempted
// whenever the head fits only once some of lower priority are gone.
func checkPreemption(t *testing.T, s State, queue []Job, d Decision, stats *propertyStats) {
	t.Helper()
	order, started := testOrder(s.Node, queue, &propertyStats{}), make(map[string]bool)
	for _, p := range d.Start {
		started[p.JobID] = true
	}
	h := slices.IndexFunc(order, func(j Job) bool { return !started[j.ID] })
	if h < 0 || s.Preemption != PreemptLowerPriority {
		if len(d.Preempt) > 0 {
			t.Errorf("jobs preempted without a head or without the policy (%q): %+v", s.Preemption, d.Preempt)
		}
		if h >= 0 && strings.Contains(d.Waiting[order[h].ID], "preempting") {
			t.Errorf("head %s without the policy: %q", order[h].ID, d.Waiting[order[h].ID])
		}
		return
	}
	head := order[h]
	// before: the running jobs and those started ahead of the head.
	before := slices.Clone(s.Running)
	for _, j := range order[:h] {
		before = append(before, Running{Job: j, GPUs: findPlacement(d, j.ID).GPUs, Started: s.Now})
	}
	victims := make(map[string]bool)
	for _, p := range d.Preempt {
		i := slices.IndexFunc(s.Running, func(r Running) bool { return r.Job.ID == p.JobID })
		switch {
		case i < 0:
			t.Errorf("preempted job %s does not run", p.JobID)
			continue
		case victims[p.JobID]:
			t.Errorf("job %s is preempted twice", p.JobID)
		case s.Running[i].Preempting:
			t.Errorf("job %s is preempted again", p.JobID)
		case p.For != head.ID || p.ForPriority != head.Priority:
			t.Errorf("job %s is preempted for %s (priority %d), not for the head %s (priority %d)",
				p.JobID, p.For, p.ForPriority, head.ID, head.Priority)
		case s.Running[i].Job.Priority >= head.Priority:
			t.Errorf("job %s of priority %d is preempted for %s of priority %d",
				p.JobID, s.Running[i].Job.Priority, head.ID, head.Priority)
		}
		victims[p.JobID] = true
	}
	stats.preempted += len(victims)
	lower := func(r Running) bool { return r.Job.Priority < head.Priority }
	without := func(gone func(Running) bool) []Running {
		return slices.DeleteFunc(slices.Clone(before), gone)
	}
	going := func(r Running) bool { return lower(r) && (r.Preempting || victims[r.Job.ID]) }
	fitsOnceGone, fitsOnceGoing := fitsBeside(s.Node, without(going), head), fitsBeside(s.Node, without(func(r Running) bool {
		return lower(r) && r.Preempting
	}), head)
	switch {
	case len(victims) > 0 && !fitsOnceGone:
		t.Errorf("head %s does not fit once the jobs preempted for it are gone", head.ID)
	case len(victims) == 0 && !fitsOnceGoing && fitsBeside(s.Node, without(lower), head):
		t.Errorf("head %s fits once jobs of lower priority are gone, but none is preempted: %q", head.ID, d.Waiting[head.ID])
	}
	for id := range victims {
		if fitsBeside(s.Node, without(func(r Running) bool { return going(r) && r.Job.ID != id }), head) {
			t.Errorf("job %s is preempted, but head %s fits without that", id, head.ID)
		}
	}
	counts := strings.Contains(d.Waiting[head.ID], "; preempting ")
	if len(victims) > 0 && !counts {
		t.Errorf("head %s preempts jobs, but its reason does not say so: %q", head.ID, d.Waiting[head.ID])
	}
	if counts {
		if !fitsOnceGone {
			t.Errorf("head %s says it preempts, but does not fit once the jobs going away are gone: %q", head.ID, d.Waiting[head.ID])
		}
		if len(victims) == 0 {
			stats.headsCountingOnGoing++
		}
		stats.backfilledBesidePreemption += len(d.Start) - h
	}
}

// Messages call a job by the name its user gave it, not by its ID.
func TestMessagesCallJobsByName(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	lo := job("j-1").named("lo").gpus(4).running(ago(time.Hour), []int{0, 1, 2, 3})
	head := job("raysubmit_pOffX").named("llama").gpus(2).priority(5).obj()
	d := Schedule(preemptive(state(n, lo)), []Job{head})
	want := []Preemption{{JobID: "j-1", For: "raysubmit_pOffX", ForName: "llama", ForPriority: 5,
		Reason: "preempted to make room for job llama (priority 5, higher than 0)"}}
	if diff := cmp.Diff(want, d.Preempt); diff != "" {
		t.Errorf("preemptions (-want +got):\n%s", diff)
	}
	// A job that fits waits behind the head, which does not.
	half := job("j-2").named("half").gpus(2).priority(9).running(ago(time.Hour), []int{0, 1})
	big := job("raysubmit_pOffX").named("llama").gpus(4).priority(5).seq(1).obj()
	d = Schedule(state(n, half), []Job{big, job("j-3").named("later").gpus(2).seq(2).obj()})
	if w := d.Waiting["j-3"]; !strings.Contains(w, "waiting behind job llama (priority 5") {
		t.Errorf("j-3 waits with %q; want it to name the head llama", w)
	}
}
