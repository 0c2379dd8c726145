package cli

import (
	"os"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Folding is on unless --fold-logs=false says otherwise, or RAY_DEDUP_LOGS does as Ray
// reads it (1 or true: on; anything else: off), the job's env before trainyard's.
func TestFoldWindow(t *testing.T) {
	cases := map[string]struct {
		flag     *bool  // --fold-logs, when given
		env      string // RAY_DEDUP_LOGS of trainyard, "-" for unset
		jobEnv   string // RAY_DEDUP_LOGS of the job, "-" for unset
		wantFold bool
	}{
		"by default":                    {env: "-", jobEnv: "-", wantFold: true},
		"--fold-logs=false":             {flag: ptr(false), env: "-", jobEnv: "-"},
		"RAY_DEDUP_LOGS=0 of trainyard": {env: "0", jobEnv: "-"},
		"RAY_DEDUP_LOGS=0 of the job":   {env: "-", jobEnv: "0"},
		"RAY_DEDUP_LOGS=1":              {env: "1", jobEnv: "-", wantFold: true},
		"RAY_DEDUP_LOGS=True":           {env: "True", jobEnv: "-", wantFold: true},
		"RAY_DEDUP_LOGS=no, as Ray":     {env: "no", jobEnv: "-"},
		"the job's env wins":            {env: "0", jobEnv: "1", wantFold: true},
		"the flag wins":                 {flag: ptr(true), env: "0", jobEnv: "0", wantFold: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.env != "-" {
				t.Setenv(rayDedupLogs, tc.env)
			} else {
				t.Setenv(rayDedupLogs, "")
				unsetenv(t, rayDedupLogs)
			}
			job := &v1.TrainJob{}
			if tc.jobEnv != "-" {
				job.Spec.Env = []v1.EnvVar{{Name: rayDedupLogs, Value: tc.jobEnv}}
			}
			opts := runOptions{foldLogs: true}
			if tc.flag != nil {
				opts.foldLogs, opts.foldLogsSet = *tc.flag, true
			}
			want := time.Duration(0)
			if !tc.wantFold {
				want = -1
			}
			if got := foldWindow(job, opts); got != want {
				t.Errorf("foldWindow = %v, want %v", got, want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// unsetenv unsets a variable for the test; t.Setenv first, so that it is restored.
func unsetenv(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
