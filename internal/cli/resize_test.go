package cli

import (
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestStartWorkers(t *testing.T) {
	elastic := func(min, max int32) *v1.TrainJob {
		return &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &max, MinWorkers: &min}}
	}
	cases := map[string]struct {
		job     *v1.TrainJob
		n       int
		wantMax int
		wantErr string
	}{
		"none given":         {job: elastic(2, 4)},
		"between":            {job: elastic(2, 4), n: 3, wantMax: 4},
		"the fewest":         {job: elastic(2, 4), n: 2, wantMax: 4},
		"below the fewest":   {job: elastic(2, 4), n: 1, wantErr: "--start-workers 1: give between 2 and 4 (--workers 2:4)"},
		"above the most":     {job: elastic(2, 4), n: 5, wantErr: "--start-workers 5: give between 2 and 4 (--workers 2:4)"},
		"a gang not elastic": {job: elastic(4, 4), n: 3, wantErr: "--start-workers 3: the gang is not elastic; give --workers MIN:MAX"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			max, err := startWith(tc.job, tc.n)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || max != tc.wantMax {
				t.Fatalf("startWith: %d, %v; want %d", max, err, tc.wantMax)
			}
			if tc.n > 0 && tc.job.Spec.WorkerCount() != tc.n {
				t.Errorf("workers %d, want %d", tc.job.Spec.WorkerCount(), tc.n)
			}
		})
	}
}
