package cli

import (
	"testing"

	"github.com/trainyard/trainyard/client"
)

func TestPrintJobList(t *testing.T) {
	jobs := []client.Job{succeededJob(), runningJob(), pendingJob(), stoppingJob()}
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
