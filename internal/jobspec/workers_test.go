package jobspec

import (
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestWorkersFlag(t *testing.T) {
	for in, want := range map[string]Workers{"4": {Max: 4}, "2:4": {Min: 2, Max: 4}, "3:3": {Min: 3, Max: 3}, " 1 : 2 ": {Min: 1, Max: 2}} {
		var w Workers
		if err := w.Set(in); err != nil || w != want {
			t.Errorf("%q: %+v %v, want %+v", in, w, err, want)
		}
	}
	for in, want := range map[string]string{"x": "want a number", "4:2": "1 <= MIN <= MAX", "0:2": "1 <= MIN <= MAX", "2:": "want a number"} {
		var w Workers
		if err := w.Set(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// --workers MIN:MAX sets spec.minWorkers and spec.workers; a bad minWorkers in a file is
// refused naming the field.
func TestElasticWorkers(t *testing.T) {
	job, err := resolve(t, "--workers", "2:4", "--", "python3", "train.py")
	if err != nil {
		t.Fatal(err)
	}
	if s := job.Spec; s.WorkerCount() != 4 || s.MinWorkerCount() != 2 {
		t.Errorf("workers %d, min %d; want 4, 2", s.WorkerCount(), s.MinWorkerCount())
	}
	min := int32(5)
	job.Spec.MinWorkers = &min
	if err := Validate(job); err == nil || !strings.Contains(err.Error(), "spec.minWorkers") {
		t.Errorf("minWorkers 5 of 4: %v", err)
	}
	plain := &v1.TrainJobSpec{}
	if plain.MinWorkerCount() != 1 {
		t.Errorf("a job without minWorkers is elastic")
	}
}
