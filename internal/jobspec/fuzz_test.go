package jobspec

import (
	"testing"
	"time"
)

// FuzzParse feeds the job-file parser arbitrary bytes: it never panics, and a job it
// accepts is defaulted and validated without panicking, with a one-line-per-problem error.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  workers: 2\n  command: [python3, train.py]\n",
		"apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  resources: {cpu: 500m, memory: 1Gi, gpu: 1}\n  command: [a]\n  env: [{name: A, value: b}]\n",
		"spec:\n  workers: two\n", "- a\n- b\n", "{}", "---\n---\n", "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec: {checkpoints: {keep: -1, scoreOrder: up}}\n",
	} {
		f.Add([]byte(seed))
	}
	now := func() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) }
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := Parse(data)
		if err != nil {
			return
		}
		if Default(job, Env{WorkDir: "/tmp", Home: "/home/fuzz", Now: now}) == nil {
			_ = Validate(job)
		}
	})
}
