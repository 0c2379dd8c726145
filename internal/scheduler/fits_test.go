package scheduler

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckFits(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	cases := map[string]struct {
		node Node
		job  Job
		want string // the error's message; "" for none
	}{
		"fits exactly": {
			node: n, job: job("a").workers(2).gpus(2).cpus(16).memGiB(128).obj(),
		},
		"asks for nothing": {
			node: Node{}, job: job("a").workers(3).obj(),
		},
		"too many GPUs": {
			node: n, job: job("a").workers(2).gpus(4).obj(),
			want: "the job needs 8 GPUs (2 workers x 4) but this machine has 4",
		},
		"GPUs on a machine without any": {
			node: node(0).cpus(8).obj(), job: job("a").gpus(1).obj(),
			want: "the job needs 1 GPU (1 worker x 1) but this machine has 0",
		},
		"duplicate GPU indices count once": {
			node: Node{GPUs: []int{0, 0, 1}}, job: job("a").gpus(3).obj(),
			want: "the job needs 3 GPUs (1 worker x 3) but this machine has 2",
		},
		"too much CPU": {
			node: n, job: job("a").workers(2).cpus(17).obj(),
			want: "the job needs 34 CPUs (2 workers x 17) but this machine has 32",
		},
		"too much memory": {
			node: n, job: job("a").workers(4).memGiB(128).obj(),
			want: "the job needs 512 GiB of memory (4 workers x 128 GiB) but this machine has 256 GiB",
		},
		"too much of everything": {
			node: n, job: job("a").workers(2).gpus(3).cpus(20).memGiB(200).obj(),
			want: "the job needs 6 GPUs (2 workers x 3) but this machine has 4; " +
				"the job needs 40 CPUs (2 workers x 20) but this machine has 32; " +
				"the job needs 400 GiB of memory (2 workers x 200 GiB) but this machine has 256 GiB",
		},
		"overflowing request": {
			node: n, job: Job{ID: "a", Workers: 4, PerWorker: Resources{MilliCPU: math.MaxInt64 / 2}},
			want: "the job needs 9223372036854775.807 CPUs (4 workers x 4611686018427387.903) but this machine has 32",
		},
		"no workers": {
			node: n, job: job("a").workers(0).obj(),
			want: "the job has 0 workers; it needs at least 1",
		},
		"negative request": {
			node: n, job: job("a").gpus(-1).obj(),
			want: "the job asks for a negative amount per worker (GPUs -1, millicores 0, memory bytes 0)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := CheckFits(tc.node, tc.job); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckFits error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckFitsTooLargeError(t *testing.T) {
	n := node(4).cpus(32).memGiB(256).obj()
	cases := map[string]struct {
		job  Job
		want []TooLargeError
	}{
		"one resource": {
			job:  job("a").workers(2).gpus(4).obj(),
			want: []TooLargeError{{Resource: ResourceGPUs, Workers: 2, PerWorker: 4, Need: 8, Have: 4}},
		},
		"two resources": {
			job: job("a").workers(2).cpus(20).memGiB(200).obj(),
			want: []TooLargeError{
				{Resource: ResourceCPU, Workers: 2, PerWorker: 20000, Need: 40000, Have: 32000},
				{Resource: ResourceMemory, Workers: 2, PerWorker: 200 * gib1, Need: 400 * gib1, Have: 256 * gib1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckFits(n, tc.job)
			var got []TooLargeError
			for _, e := range unwrapAll(err) {
				if tl, ok := e.(*TooLargeError); ok {
					got = append(got, *tl)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckFits errors (-want +got):\n%s", diff)
			}
			var first *TooLargeError
			if !errors.As(err, &first) || *first != tc.want[0] {
				t.Errorf("errors.As(%v) = %v, want the first *TooLargeError", err, first)
			}
		})
	}
}

// unwrapAll returns err itself if it wraps nothing, or the errors it wraps.
func unwrapAll(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return []error{err}
}

func TestFormat(t *testing.T) {
	cases := map[string]struct {
		got, want string
	}{
		"whole cores":      {cpus(16000), "16 CPUs"},
		"one core":         {cpus(1000), "1 CPU"},
		"half a core":      {cpus(500), "0.5 CPUs"},
		"millicores":       {cpus(1250), "1.25 CPUs"},
		"no cores":         {cores(0), "0"},
		"whole GiB":        {gib(64 * gib1), "64"},
		"half a GiB":       {gib(gib1 / 2), "0.5"},
		"rounded GiB":      {gib(gib1 / 3), "0.33"},
		"one GPU":          {plural(1, "GPU"), "1 GPU"},
		"no GPUs":          {plural(0, "GPU"), "0 GPUs"},
		"equal priority":   {behind(job("h").seq(1).obj(), job("a").seq(2).obj()), "waiting behind job h (priority 0, submitted earlier)"},
		"higher priority":  {behind(job("h").priority(3).obj(), job("a").priority(1).obj()), "waiting behind job h (priority 3, higher than 1)"},
		"same Seq, by ID":  {behind(job("h").obj(), job("i").obj()), "waiting behind job h (priority 0, ahead in the queue)"},
		"nothing is short": {shortfall(amount{}, amount{}), ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
