package cli

import (
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// One process started without --workers, --procs-per-worker or a job file is marked
// implicit, so Ray's fit() may launch a gang from it; anything else is an explicit gang.
func TestDriverEnvMarksHowTheGangWasGiven(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "1,3")
	one, two := int32(1), int32(2)
	cases := []struct {
		name    string
		workers *int32
		given   bool
		want    string
	}{
		{"plain single process", &one, false, "implicit"},
		{"--workers 1", &one, true, "explicit"},
		{"--workers 2", &two, true, "explicit"},
	}
	for _, c := range cases {
		job := &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: c.workers, ProcsPerWorker: &one}}
		env := driverEnv(job, runOptions{gangGiven: c.given}, "/helper")
		if env["TRAINYARD_GANG"] != c.want || env["PYTHONPATH"] != "/helper" {
			t.Errorf("%s: TRAINYARD_GANG=%q PYTHONPATH=%q, want %q and /helper", c.name, env["TRAINYARD_GANG"], env["PYTHONPATH"], c.want)
		}
		if env["TRAINYARD_BINARY"] == "" || env["TRAINYARD_HOST_CUDA_VISIBLE_DEVICES"] != "1,3" {
			t.Errorf("%s: TRAINYARD_BINARY=%q TRAINYARD_HOST_CUDA_VISIBLE_DEVICES=%q, want this binary and 1,3",
				c.name, env["TRAINYARD_BINARY"], env["TRAINYARD_HOST_CUDA_VISIBLE_DEVICES"])
		}
	}
}
