package cli

import (
	"testing"

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

func TestPrintJobList(t *testing.T) {
	old := runningJob() // from a server that does not say what jobs hold
	old.ID, old.Name = "from-an-older-server", ""
	jobs := []client.Job{
		holding(succeededJob(), 2, 2, "8", "32Gi"),
		holding(runningJob(), 1, 4, "16", ""),
		holding(pendingJob(), 2, 4, "8", "64Gi"),
		holding(stoppingJob(), 3, 0, "500m", "1536Mi"),
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
