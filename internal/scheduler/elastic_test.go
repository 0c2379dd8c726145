package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestScheduleElastic(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	settle := 10 * time.Second
	cases := map[string]struct {
		state State
		queue []Job
		want  Decision
	}{
		"starts with its most workers when they fit": {
			state: state(n),
			queue: []Job{job("e").workers(4).elastic(2).gpus(1).queued(now).obj()},
			want:  Decision{Start: []Placement{{JobID: "e", GPUs: gpus([]int{0}, []int{1}, []int{2}, []int{3})}}, Waiting: map[string]string{}},
		},
		"waits the settle time for more when only some fit": {
			state: state(n, job("r").gpus(1).running(ago(time.Hour), []int{0})),
			queue: []Job{job("e").workers(4).elastic(2).gpus(1).queued(ago(4 * time.Second)).obj()},
			want: Decision{Waiting: map[string]string{
				"e": "3 of its 4 workers fit; waiting up to 6s for room for more (--elastic-settle)"}},
		},
		"starts with what fits once settled": {
			state: state(n, job("r").gpus(1).running(ago(time.Hour), []int{0})),
			queue: []Job{job("e").workers(4).elastic(2).gpus(1).queued(ago(settle)).obj()},
			want:  Decision{Start: []Placement{{JobID: "e", GPUs: gpus([]int{1}, []int{2}, []int{3})}}, Waiting: map[string]string{}},
		},
		"waits while fewer than its fewest fit": {
			state: state(n, job("r").gpus(3).running(ago(time.Hour), []int{0, 1, 2})),
			queue: []Job{job("e").workers(4).elastic(2).gpus(1).queued(ago(time.Hour)).obj()},
			want: Decision{Waiting: map[string]string{
				"e": "needs 2 GPUs, 1 free (its fewest workers, 2 of 4)"}},
		},
		"CPU slots count as room": {
			state: state(n, job("r").cpus(24).running(ago(time.Hour))),
			queue: []Job{job("e").workers(4).elastic(1).cpus(4).queued(ago(time.Hour)).obj()},
			want:  Decision{Start: []Placement{{JobID: "e", GPUs: gpus([]int{}, []int{})}}, Waiting: map[string]string{}},
		},
		"its fewest must fit the machine": {
			state: state(n),
			queue: []Job{job("e").workers(8).elastic(5).gpus(1).obj()},
			want: Decision{Waiting: map[string]string{
				"e": "can never run here, even with its fewest workers: the job needs 5 GPUs (5 workers x 1) but this machine has 4"}},
		},
		"grows into free GPUs when nobody waits": {
			state: state(n, job("e").workers(4).elastic(2).gpus(1).runningSmaller(ago(time.Hour), []int{1}, []int{3})),
			want: Decision{Waiting: map[string]string{},
				Resize: []Resize{{JobID: "e", From: 2, To: 4, GPUs: gpus([]int{1}, []int{3}, []int{0}, []int{2}), Reason: "GPUs 0,2 free"}}},
		},
		"grows no further than its most": {
			state: state(node(8).obj(), job("e").workers(3).elastic(1).gpus(2).runningSmaller(ago(time.Hour), []int{0, 1})),
			want: Decision{Waiting: map[string]string{},
				Resize: []Resize{{JobID: "e", From: 1, To: 3, GPUs: gpus([]int{0, 1}, []int{2, 3}, []int{4, 5}), Reason: "GPUs 2,3,4,5 free"}}},
		},
		"grows into free CPU": {
			state: state(n, job("e").workers(3).elastic(1).cpus(8).runningSmaller(ago(time.Hour), []int{})),
			want: Decision{Waiting: map[string]string{},
				Resize: []Resize{{JobID: "e", From: 1, To: 3, GPUs: gpus([]int{}, []int{}, []int{}), Reason: "16 CPUs free for 2 more workers"}}},
		},
		"does not grow while a job waits": {
			state: state(n, job("e").workers(4).elastic(2).gpus(1).runningSmaller(ago(time.Hour), []int{0}, []int{1})),
			queue: []Job{job("big").gpus(3).obj()},
			want:  Decision{Waiting: map[string]string{"big": "needs 3 GPUs, 2 free"}},
		},
		"does not resize a gang resizing already": {
			state: state(n, Running{Job: job("e").workers(4).elastic(2).gpus(1).obj(), GPUs: gpus([]int{0}, []int{1}),
				Started: ago(time.Hour), Workers: 2, Resizing: true}),
			want: Decision{Waiting: map[string]string{}},
		},
		"shrinks an elastic job instead of preempting it": {
			state: func() State {
				s := state(n, job("e").workers(4).elastic(2).gpus(1).running(ago(time.Hour), []int{0}, []int{1}, []int{2}, []int{3}))
				s.Preemption = PreemptLowerPriority
				return s
			}(),
			queue: []Job{job("hi").gpus(1).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 1 GPU, 0 free; shrinking job e (priority 0) from 4 to 3 workers to make room"},
				Resize: []Resize{{JobID: "e", From: 4, To: 3, GPUs: gpus([]int{0}, []int{1}, []int{2}), For: "hi", ForPriority: 5,
					Reason: "to make room for job hi (priority 5, higher than 0)"}},
			},
		},
		"shrinks to its fewest, then preempts others": {
			state: func() State {
				s := state(node(6).obj(),
					job("e").workers(4).elastic(2).gpus(1).running(ago(time.Hour), []int{0}, []int{1}, []int{2}, []int{3}),
					job("lo").workers(2).gpus(1).running(ago(2*time.Hour), []int{4}, []int{5}))
				s.Preemption = PreemptLowerPriority
				return s
			}(),
			queue: []Job{job("hi").gpus(4).priority(5).obj()},
			want: Decision{
				Waiting: map[string]string{"hi": "needs 4 GPUs, 0 free; preempting job lo (priority 0) and shrinking job e (priority 0) from 4 to 2 workers to make room"},
				Preempt: []Preemption{{JobID: "lo", For: "hi", ForPriority: 5, Reason: "preempted to make room for job hi (priority 5, higher than 0)"}},
				Resize: []Resize{{JobID: "e", From: 4, To: 2, GPUs: gpus([]int{0}, []int{1}), For: "hi", ForPriority: 5,
					Reason: "to make room for job hi (priority 5, higher than 0)"}},
			},
		},
		"a shrinking gang's leaving workers are expected now": {
			state: func() State {
				s := state(n, Running{Job: job("e").workers(4).elastic(2).gpus(1).obj(), GPUs: gpus([]int{0}, []int{1}, []int{2}, []int{3}),
					Started: ago(time.Hour), Resizing: true, ResizeTo: 2})
				s.Preemption = PreemptLowerPriority
				return s
			}(),
			queue: []Job{job("hi").gpus(2).priority(5).obj(), job("small").gpus(1).obj()},
			want: Decision{Waiting: map[string]string{"hi": "needs 2 GPUs, 0 free; preempting job e (priority 0, shrinking) to make room",
				"small": "needs 1 GPU, 0 free"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.state.ElasticSettle = settle
			if diff := cmp.Diff(tc.want, Schedule(tc.state, tc.queue)); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
		})
	}
}
