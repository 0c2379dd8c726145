package cli

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
)

// holding returns j with the workers and each one's resources a server reports; cpu and
// memory are quantities, "" for none.
func holding(j client.Job, workers int, gpus int32, cpu, memory string) client.Job {
	r := &v1.WorkerResources{GPU: gpus}
	if cpu != "" {
		q := resource.MustParse(cpu)
		r.CPU = &q
	}
	if memory != "" {
		q := resource.MustParse(memory)
		r.Memory = &q
	}
	j.Workers, j.Resources = workers, r
	return j
}

// preemptingJob is a running job that the server preempts for bert-large.
func preemptingJob() client.Job {
	return client.Job{ID: "sweep-4", Name: "sweep4", Status: client.StatusRunning, GPUs: [][]int{{0, 1, 2, 3}},
		Message: "preempted to make room for job bert-large (priority 10, higher than 0); stopping, to go back to the " +
			"queue and resume from its latest checkpoint", Preempting: true,
		Preemption:  &client.Preemption{For: "bert-large", ForPriority: 10, At: now.Add(-5 * time.Second)},
		SubmittedAt: now.Add(-2 * time.Hour), StartedAt: at(-2 * time.Hour), RunDir: "/data/runs/sweep-4"}
}

// preemptedJob is a job that went back to the queue after a preemption for bert-large.
func preemptedJob() client.Job {
	return client.Job{ID: "sweep-5", Name: "sweep5", Status: client.StatusPending, Restarts: 1, Preemptions: 2,
		Message: "preempted by job bert-large (priority 10); requeued, resumes from its latest checkpoint (preemption 2); " +
			"needs 4 GPUs, 0 free",
		Preemption: &client.Preemption{For: "bert-large", ForPriority: 10, At: now.Add(-2 * time.Minute),
			Requeued: at(-100 * time.Second)},
		SubmittedAt: now.Add(-3 * time.Hour), RunDir: "/data/runs/sweep-5"}
}

func TestPrintJobList(t *testing.T) {
	old := runningJob() // from a server that does not say what jobs hold
	old.ID, old.Name = "from-an-older-server", ""
	driver := holding(runningJob(), 1, 0, "1", "") // a Ray driver whose fit() leased a gang
	driver.ID, driver.Name, driver.GPUs, driver.RunDir = "raysubmit_d", "ray-driver", [][]int{{}}, "/data/runs/raysubmit_d"
	driver.Gang = &client.Gang{Workers: 2, GPUsPerWorker: 1, MilliCPUPerWorker: 1000, Granted: true, GPUs: [][]int{{2}, {3}}}
	jobs := []client.Job{
		holding(succeededJob(), 2, 2, "8", "32Gi"),
		holding(runningJob(), 1, 4, "16", ""),
		holding(pendingJob(), 2, 4, "8", "64Gi"),
		holding(stoppingJob(), 3, 0, "500m", "1536Mi"),
		holding(preemptingJob(), 1, 4, "8", ""),
		holding(preemptedJob(), 1, 4, "8", ""),
		driver,
		old,
	}
	cases := map[string]struct {
		jobs []client.Job
		wide bool
	}{
		"list":       {jobs: jobs},
		"list-wide":  {jobs: jobs, wide: true},
		"list-empty": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, out := testView(tc.wide)
			if err := printJobList(v, tc.jobs); err != nil {
				t.Fatal(err)
			}
			golden(t, name, out.String())
		})
	}
}
