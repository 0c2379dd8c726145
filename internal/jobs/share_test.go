package jobs

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/scheduler"
)

func TestDefaultCPU(t *testing.T) {
	box := scheduler.Node{GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, MilliCPU: 32000}
	cases := map[string]struct {
		node                 scheduler.Node
		workers, procs, gpus int32
		want                 int64
	}{
		"CPU-only: 1 CPU per process":                {node: box, workers: 2, procs: 4, want: 4000},
		"one GPU of 8 on 32 cores: 4 CPUs":           {node: box, workers: 2, procs: 1, gpus: 1, want: 4000},
		"4 GPUs of 8 on 32 cores: 16 CPUs":           {node: box, workers: 1, procs: 4, gpus: 4, want: 16000},
		"a GPU's share under 1 CPU: 1 CPU":           {node: scheduler.Node{GPUs: []int{0, 1, 2, 3}, MilliCPU: 2000}, workers: 1, procs: 1, gpus: 1, want: 1000},
		"never more than the machine has per worker": {node: scheduler.Node{GPUs: []int{0, 1, 2, 3}, MilliCPU: 2000}, workers: 4, procs: 1, gpus: 1, want: 500},
		"CPU-only, more processes than cores":        {node: scheduler.Node{MilliCPU: 2000}, workers: 1, procs: 8, want: 2000},
		"a GPU listed twice counts once":             {node: scheduler.Node{GPUs: []int{0, 0, 1, 1}, MilliCPU: 8000}, workers: 1, procs: 1, gpus: 1, want: 4000},
		"a machine without CPU to count: none":       {node: scheduler.Node{GPUs: []int{0}}, workers: 1, procs: 1, gpus: 1, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := v1.TrainJobSpec{Workers: &tc.workers, ProcsPerWorker: &tc.procs, Resources: v1.WorkerResources{GPU: tc.gpus}}
			if got := DefaultCPU(tc.node, &spec); got != tc.want {
				t.Errorf("DefaultCPU = %dm, want %dm", got, tc.want)
			}
		})
	}
}

// A job submitted without a CPU request is stored with its default share, which the
// scheduler then counts; a job that names its CPU keeps it.
func TestSubmitRecordsTheDefaultCPU(t *testing.T) {
	svc, _ := idle(t, scheduler.Node{MilliCPU: 2000})
	e := &env{t: t, dir: t.TempDir()}
	for cpus, want := range map[string]string{"": "1", "500m": "500m"} {
		j, err := svc.Submit(Submission{Job: e.job("true", cpus)})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := decodeSpec(j)
		if err != nil {
			t.Fatal(err)
		}
		got := spec.Spec.Resources.CPU
		if got == nil || got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("cpus %q: stored spec.resources.cpu %v, want %s", cpus, got, want)
		}
		if sj, q := schedJob(j.ID, 0, 0, spec), resource.MustParse(want); sj.PerWorker.MilliCPU != q.MilliValue() {
			t.Errorf("cpus %q: the scheduler counts %dm per worker", cpus, sj.PerWorker.MilliCPU)
		}
	}
}

// An elastic gang is accepted when its fewest workers fit the machine, though its most
// do not (it runs with what fits), and refused, saying so, when even its fewest do not.
func TestSubmitElasticGangFitsAtItsFewest(t *testing.T) {
	svc, _ := idle(t, scheduler.Node{MilliCPU: 2000})
	e := &env{t: t, dir: t.TempDir()}
	elastic := func(min, max int32) *v1.TrainJob {
		job := e.job("true", "")
		one := resource.MustParse("1")
		job.Spec.Workers, job.Spec.MinWorkers, job.Spec.Resources.CPU = &max, &min, &one
		return job
	}
	if _, err := svc.Submit(Submission{Job: elastic(2, 4)}); err != nil {
		t.Errorf("submit of --workers 2:4 with 2 of 4 fitting: %v", err)
	}
	_, err := svc.Submit(Submission{Job: elastic(3, 4)})
	if want := "even with its fewest workers (3): the job needs 3 CPUs (3 workers x 1) but this machine has 2"; !errors.Is(err, ErrNeverFits) ||
		!strings.Contains(err.Error(), want) {
		t.Errorf("submit of --workers 3:4: %v, want ErrNeverFits saying %q", err, want)
	}
}
