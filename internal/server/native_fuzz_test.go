package server

import (
	"errors"
	"testing"

	"github.com/trainyard/trainyard/internal/jobspec"
)

// FuzzDecodeNativeJSON feeds the native submit decoder arbitrary bodies: it never panics,
// refuses with errInvalid, and a job it accepts is defaulted and validated without
// panicking.
func FuzzDecodeNativeJSON(f *testing.F) {
	for _, seed := range []string{
		`{"job": {"apiVersion": "trainyard.dev/v1alpha1", "kind": "TrainJob", "spec": {"command": ["true"]}}}`,
		`{"job": {"apiVersion": "trainyard.dev/v1alpha1", "kind": "TrainJob", "spec": {"workers": 2, "resources": {"cpu": "500m", "gpu": 1}, "command": ["python3"]}}, "priority": 5}`,
		`{"job": null}`, `{}`, `[]`, `{"job": {"spec": {"workers": "two"}}}`, `{"id": "../x", "job": {}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, err := decodeNativeJSON(body)
		if err != nil {
			if !errors.Is(err, errInvalid) {
				t.Fatalf("refusal %v is not errInvalid", err)
			}
			return
		}
		if sub.job == nil {
			t.Fatalf("accepted a body without a job: %q", body)
		}
		sub.job.Spec.RunName, sub.job.Spec.StoragePath = "fuzz", "/tmp/runs"
		if jobspec.Default(sub.job, jobspec.Env{WorkDir: "/tmp", Home: "/home/fuzz"}) == nil {
			_ = jobspec.Validate(sub.job)
		}
	})
}
