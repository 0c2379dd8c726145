package jobspec

import (
	"strings"
	"testing"
)

const jobHead = "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  command: [python3, train.py]\n"

// A job file gives an elastic gang as spec.workers {min, max} or "MIN:MAX", as --workers
// does, or as the TrainJob's own spec.workers and spec.minWorkers.
func TestJobFileElasticWorkers(t *testing.T) {
	for _, body := range []string{
		"  workers: {min: 2, max: 4}\n",
		"  workers:\n    min: 2\n    max: 4\n",
		"  workers: \"2:4\"\n",
		"  workers: 4\n  minWorkers: 2\n",
	} {
		job, err := Parse([]byte(jobHead + body))
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if job.Spec.WorkerCount() != 4 || job.Spec.MinWorkerCount() != 2 {
			t.Errorf("%q: workers %d, min %d; want 4 and 2", body, job.Spec.WorkerCount(), job.Spec.MinWorkerCount())
		}
	}
	job, err := Parse([]byte(jobHead + "  workers: 3\n"))
	if err != nil || job.Spec.WorkerCount() != 3 || job.Spec.MinWorkers != nil {
		t.Errorf("a plain count: %v, %+v", err, job)
	}
}

func TestJobFileElasticWorkersRefused(t *testing.T) {
	for body, want := range map[string]string{
		"  workers: {min: 2}\n":                          "spec.workers: give a number of workers (4), or the range of an elastic gang: {min: 2, max: 4} or \"2:4\" (both min and max, whole numbers)",
		"  workers: {min: 2, max: 4, step: 1}\n":         "spec.workers: give a number of workers (4), or the range",
		"  workers: {min: 5, max: 4}\n":                  "spec.workers: {min: 5, max: 4}: min must be at least 1 and at most max",
		"  workers: {min: 0, max: 4}\n":                  "min must be at least 1",
		"  workers: {min: two, max: 4}\n":                "both min and max, whole numbers",
		"  workers: \"4\"\n":                             "spec.workers: \"4\" is a string: give a number of workers (4)",
		"  workers: \"a:b\"\n":                           "spec.workers: \"a:b\": want a number of workers, or MIN:MAX",
		"  workers: {min: 2, max: 4}\n  minWorkers: 2\n": "spec.workers is a range and spec.minWorkers is set too: give one of them",
	} {
		_, err := Parse([]byte(jobHead + body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want it to say %q", body, err, want)
		}
	}
}
