package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSchedule(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	cases := map[string]struct {
		state State
		queue []Job
		want  Decision
	}{
		"empty queue": {
			state: state(n),
			want:  Decision{Waiting: map[string]string{}},
		},
		"fits and starts on the lowest free GPUs": {
			state: state(n, job("r").gpus(1).running(ago(time.Hour), []int{0})),
			queue: []Job{job("a").gpus(2).obj()},
			want:  Decision{Start: []Placement{{JobID: "a", GPUs: gpus([]int{1, 2})}}, Waiting: map[string]string{}},
		},
		"each worker gets its own GPUs": {
			state: state(node(8).obj(), job("r").gpus(1).running(ago(time.Hour), []int{1})),
			queue: []Job{job("a").workers(2).gpus(2).obj()},
			want:  Decision{Start: []Placement{{JobID: "a", GPUs: gpus([]int{0, 2}, []int{3, 4})}}, Waiting: map[string]string{}},
		},
		"a worker without GPUs gets an empty set": {
			state: state(n),
			queue: []Job{job("a").workers(2).cpus(1).obj()},
			want:  Decision{Start: []Placement{{JobID: "a", GPUs: gpus([]int{}, []int{})}}, Waiting: map[string]string{}},
		},
		"waits for GPUs": {
			state: state(n, job("r").gpus(3).running(ago(time.Hour), []int{0, 1, 2})),
			queue: []Job{job("a").gpus(2).obj()},
			want:  Decision{Waiting: map[string]string{"a": "needs 2 GPUs, 1 free"}},
		},
		"waits for CPU": {
			state: state(n, job("r").cpus(24).running(ago(time.Hour))),
			queue: []Job{job("a").cpus(16).obj()},
			want:  Decision{Waiting: map[string]string{"a": "needs 16 CPUs, 8 free"}},
		},
		"waits for memory": {
			state: state(n, job("r").memGiB(224).running(ago(time.Hour))),
			queue: []Job{job("a").memGiB(64).obj()},
			want:  Decision{Waiting: map[string]string{"a": "needs 64 GiB of memory, 32 GiB free"}},
		},
		"waits for fractions of a core": {
			state: state(n, job("r").milliCPU(31500).running(ago(time.Hour))),
			queue: []Job{job("a").cpus(1).obj()},
			want:  Decision{Waiting: map[string]string{"a": "needs 1 CPU, 0.5 free"}},
		},
		"priority jumps the queue": {
			state: state(n),
			queue: []Job{job("low").gpus(4).seq(1).obj(), job("high").gpus(4).priority(5).seq(2).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "high", GPUs: gpus([]int{0, 1, 2, 3})}},
				Waiting: map[string]string{"low": "needs 4 GPUs, 0 free"},
			},
		},
		"first come first served among equal priority": {
			state: state(n),
			queue: []Job{job("second").gpus(4).seq(2).obj(), job("first").gpus(4).seq(1).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "first", GPUs: gpus([]int{0, 1, 2, 3})}},
				Waiting: map[string]string{"second": "needs 4 GPUs, 0 free"},
			},
		},
		"gang of 3 needs 3 times the GPUs": {
			state: state(n, job("r").gpus(2).running(ago(time.Hour), []int{0, 1})),
			queue: []Job{job("a").workers(3).gpus(1).obj()},
			want:  Decision{Waiting: map[string]string{"a": "needs 3 GPUs, 2 free"}},
		},
		"gang of 3 needs 3 times the CPU and memory": {
			state: state(n, job("r").cpus(16).memGiB(128).running(ago(time.Hour))),
			queue: []Job{job("a").workers(3).cpus(8).memGiB(64).obj()},
			want:  Decision{Waiting: map[string]string{"a": "needs 24 CPUs, 16 free; needs 192 GiB of memory, 128 GiB free"}},
		},
		"gang of 3 starts when all workers fit": {
			state: state(n, job("r").gpus(1).running(ago(time.Hour), []int{0})),
			queue: []Job{job("a").workers(3).gpus(1).cpus(8).obj()},
			want:  Decision{Start: []Placement{{JobID: "a", GPUs: gpus([]int{1}, []int{2}, []int{3})}}, Waiting: map[string]string{}},
		},
		"never-fitting job gets the reason and does not block the queue": {
			state: state(n),
			queue: []Job{job("huge").workers(2).gpus(4).priority(9).obj(), job("b").gpus(1).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "b", GPUs: gpus([]int{0})}},
				Waiting: map[string]string{"huge": "can never run here: the job needs 8 GPUs (2 workers x 4) but this machine has 4"},
			},
		},
		"queued job whose ID is running waits": {
			state: state(n, job("a").gpus(1).running(ago(time.Hour), []int{0})),
			queue: []Job{job("a").gpus(1).obj()},
			want:  Decision{Waiting: map[string]string{"a": "a job with this ID is already running"}},
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

func TestScheduleBackfill(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	// Two GPUs busy for one more hour: the 4-GPU head's shadow time is in one hour.
	hourLeft := state(n, job("r").gpus(2).limit(2*time.Hour).running(ago(time.Hour), []int{0, 1}))
	head := job("head").gpus(4).seq(1).obj()
	// Three GPUs busy for one more hour: the 2-GPU head leaves 2 GPUs extra.
	threeBusy := state(n, job("r").gpus(3).limit(2*time.Hour).running(ago(time.Hour), []int{0, 1, 2}))
	// Four GPUs busy for as long as the job runs: the head's shadow time is unknown.
	forever := state(n, job("r").gpus(4).cpus(4).running(ago(time.Hour), []int{0, 1, 2, 3}))
	cases := map[string]struct {
		state State
		queue []Job
		want  Decision
	}{
		"ends before the head's shadow time": {
			state: hourLeft,
			queue: []Job{head, job("short").gpus(2).limit(30 * time.Minute).seq(2).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "short", GPUs: gpus([]int{2, 3})}},
				Waiting: map[string]string{"head": "needs 4 GPUs, 2 free"},
			},
		},
		"ends exactly at the head's shadow time": {
			state: hourLeft,
			queue: []Job{head, job("short").gpus(2).limit(time.Hour).seq(2).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "short", GPUs: gpus([]int{2, 3})}},
				Waiting: map[string]string{"head": "needs 4 GPUs, 2 free"},
			},
		},
		"refused: would end after the head's shadow time": {
			state: hourLeft,
			queue: []Job{head, job("long").gpus(2).limit(time.Hour + time.Second).seq(2).obj()},
			want: Decision{Waiting: map[string]string{
				"head": "needs 4 GPUs, 2 free",
				"long": "waiting behind job head (priority 0, submitted earlier)",
			}},
		},
		"refused: no time limit": {
			state: hourLeft,
			queue: []Job{head, job("open").gpus(1).seq(2).obj()},
			want: Decision{Waiting: map[string]string{
				"head": "needs 4 GPUs, 2 free",
				"open": "waiting behind job head (priority 0, submitted earlier)",
			}},
		},
		"refused behind a higher-priority head": {
			state: hourLeft,
			queue: []Job{job("head").gpus(4).priority(5).seq(2).obj(), job("low").gpus(1).priority(1).seq(1).obj()},
			want: Decision{Waiting: map[string]string{
				"head": "needs 4 GPUs, 2 free",
				"low":  "waiting behind job head (priority 5, higher than 1)",
			}},
		},
		"fits in the extra resources": {
			state: threeBusy,
			queue: []Job{job("head").gpus(2).seq(1).obj(), job("open").gpus(1).seq(2).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "open", GPUs: gpus([]int{3})}},
				Waiting: map[string]string{"head": "needs 2 GPUs, 1 free"},
			},
		},
		"refused: an earlier backfill took the extra resources": {
			state: state(n, job("r").gpus(4).limit(time.Hour).running(now, []int{0, 1, 2, 3})),
			queue: []Job{
				job("head").gpus(4).cpus(16).seq(1).obj(),
				job("first").cpus(10).seq(2).obj(),
				job("second").cpus(10).seq(3).obj(),
			},
			want: Decision{
				Start: []Placement{{JobID: "first", GPUs: gpus([]int{})}},
				Waiting: map[string]string{
					"head":   "needs 4 GPUs, 0 free",
					"second": "waiting behind job head (priority 0, submitted earlier)",
				},
			},
		},
		"a job that does not fit now gives its own shortfall": {
			state: hourLeft,
			queue: []Job{head, job("three").gpus(3).limit(time.Minute).seq(2).obj()},
			want: Decision{Waiting: map[string]string{
				"head":  "needs 4 GPUs, 2 free",
				"three": "needs 3 GPUs, 2 free",
			}},
		},
		"a job started in this decision runs from now": {
			state: state(n),
			queue: []Job{
				job("first").gpus(2).limit(time.Hour).priority(5).obj(),
				job("head").gpus(4).priority(1).obj(),
				job("long").gpus(2).limit(2 * time.Hour).seq(1).obj(),
				job("short").gpus(2).limit(time.Hour).seq(2).obj(),
			},
			want: Decision{
				Start: []Placement{{JobID: "first", GPUs: gpus([]int{0, 1})}, {JobID: "short", GPUs: gpus([]int{2, 3})}},
				Waiting: map[string]string{
					"head": "needs 4 GPUs, 2 free",
					"long": "waiting behind job head (priority 1, higher than 0)",
				},
			},
		},
		"unknown end: a CPU-only job runs while the head waits for GPUs": {
			state: forever,
			queue: []Job{job("head").gpus(2).cpus(8).seq(1).obj(), job("cpu").cpus(4).seq(2).obj()},
			want: Decision{
				Start:   []Placement{{JobID: "cpu", GPUs: gpus([]int{})}},
				Waiting: map[string]string{"head": "needs 2 GPUs, 0 free"},
			},
		},
		"unknown end: a time limit does not let a job take GPUs": {
			state: state(n, job("r").gpus(2).running(ago(time.Hour), []int{0, 1})),
			queue: []Job{head, job("short").gpus(1).limit(time.Minute).seq(2).obj()},
			want: Decision{Waiting: map[string]string{
				"head":  "needs 4 GPUs, 2 free",
				"short": "waiting behind job head (priority 0, submitted earlier)",
			}},
		},
		"unknown end: the CPU the head needs stays free": {
			state: state(node(4).cpus(16).memGiB(256).obj(), job("r").gpus(4).cpus(4).running(ago(time.Hour), []int{0, 1, 2, 3})),
			queue: []Job{
				job("head").gpus(2).cpus(8).seq(1).obj(),
				job("six").cpus(6).seq(2).obj(),
				job("four").cpus(4).seq(3).obj(),
			},
			want: Decision{
				Start: []Placement{{JobID: "four", GPUs: gpus([]int{})}},
				Waiting: map[string]string{
					"head": "needs 2 GPUs, 0 free",
					"six":  "waiting behind job head (priority 0, submitted earlier)",
				},
			},
		},
		"unknown end: a resource the head lacks is never backfilled": {
			state: state(node(4).cpus(16).memGiB(256).obj(), job("r").cpus(12).running(ago(time.Hour))),
			queue: []Job{job("head").cpus(8).seq(1).obj(), job("small").cpus(1).gpus(1).seq(2).obj()},
			want: Decision{Waiting: map[string]string{
				"head":  "needs 8 CPUs, 4 free",
				"small": "waiting behind job head (priority 0, submitted earlier)",
			}},
		},
		"overdue job counts as ending now": {
			state: state(n, job("r").gpus(4).limit(time.Hour).running(ago(3*time.Hour), []int{0, 1, 2, 3})),
			queue: []Job{
				job("head").gpus(4).cpus(8).seq(1).obj(),
				job("short").cpus(30).limit(time.Minute).seq(2).obj(),
				job("cpu").cpus(24).seq(3).obj(),
			},
			want: Decision{
				Start: []Placement{{JobID: "cpu", GPUs: gpus([]int{})}},
				Waiting: map[string]string{
					"head":  "needs 4 GPUs, 0 free",
					"short": "waiting behind job head (priority 0, submitted earlier)",
				},
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
