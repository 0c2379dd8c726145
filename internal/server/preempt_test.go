package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/store"
)

// The native API shows a job's restarts and preemptions, its latest preemption and the
// message that says what it did, in the job list and in a job's detail.
func TestNativeJobShowsPreemptions(t *testing.T) {
	e := newEnv(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	requeued, resumed := at.Add(30*time.Second), at.Add(time.Minute)
	msg := "preempted by job hi (priority 5); requeued, resumes from its latest checkpoint (preemption 2)"
	err := e.store.Create(&store.Job{ID: "lo", Status: store.Succeeded, Spec: []byte(trainJob("true")), Message: msg,
		Restarts: 1, Preemptions: 2, Preemption: &store.Preemption{For: "hi", ForPriority: 5, At: at, Signalled: true,
			Requeued: &requeued, Resumed: &resumed}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"restarts": 1.0, "preemptions": 2.0, "message": msg, "preemption": map[string]any{
		"for": "hi", "forPriority": 5.0, "at": "2026-03-01T12:00:00Z", "requeued": "2026-03-01T12:00:30Z",
		"resumed": "2026-03-01T12:01:00Z"}}
	pick := func(job map[string]any) map[string]any {
		got := map[string]any{}
		for k := range want {
			got[k] = job[k]
		}
		if p, ok := job["preempting"]; ok { // only while it stops
			got["preempting"] = p
		}
		return got
	}
	detail := decode[map[string]any](t, e.request("GET", "/api/v1/jobs/lo", nil))
	if diff := cmp.Diff(want, pick(detail["job"].(map[string]any))); diff != "" {
		t.Errorf("GET /api/v1/jobs/lo (-want +got):\n%s", diff)
	}
	list := decode[struct{ Jobs []map[string]any }](t, e.request("GET", "/api/v1/jobs", nil))
	if len(list.Jobs) != 1 {
		t.Fatalf("GET /api/v1/jobs: %d jobs", len(list.Jobs))
	}
	if diff := cmp.Diff(want, pick(list.Jobs[0])); diff != "" {
		t.Errorf("GET /api/v1/jobs (-want +got):\n%s", diff)
	}
}

// A running job that the server preempted says so until it is queued again.
func TestToJobPreempting(t *testing.T) {
	now := time.Now()
	cases := map[string]struct {
		job  store.Job
		want bool
	}{
		"running":                 {job: store.Job{Status: store.Running}},
		"running, preempted":      {job: store.Job{Status: store.Running, Preemption: &store.Preemption{For: "hi"}}, want: true},
		"pending, requeued":       {job: store.Job{Status: store.Pending, Preemption: &store.Preemption{For: "hi", Requeued: &now}}},
		"running again":           {job: store.Job{Status: store.Running, Preemption: &store.Preemption{For: "hi", Requeued: &now, Resumed: &now}}},
		"finished while stopping": {job: store.Job{Status: store.Succeeded, Preemption: &store.Preemption{For: "hi"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.job.ID, tc.job.Spec = "lo", json.RawMessage(`{}`)
			if got := toJob(&tc.job); got.Preempting != tc.want || (got.Preemption == nil) != (tc.job.Preemption == nil) {
				t.Errorf("preempting %v, preemption %+v; want %v", got.Preempting, got.Preemption, tc.want)
			}
		})
	}
}
