package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/store"
)

// trainJob is a TrainJob document (JSON) that runs a shell script, with extra spec
// fields given as JSON members ("\"maxRestarts\": 1").
func trainJob(script string, extra ...string) string {
	spec := fmt.Sprintf(`"command": ["sh", "-c", %q]`, script)
	for _, x := range extra {
		spec += ", " + x
	}
	return fmt.Sprintf(`{"apiVersion": %q, "kind": %q, "spec": {%s}}`, v1.APIVersion, v1.Kind, spec)
}

// nativeSubmit submits a TrainJob with the JSON API and returns the new job.
func (e *env) nativeSubmit(body string) Job {
	e.t.Helper()
	r := e.request("POST", "/api/v1/jobs", []byte(body))
	wantStatus(e.t, r, http.StatusCreated)
	return decode[Job](e.t, r)
}

// A job's whole life through the native API.
func TestNativeJobLifecycle(t *testing.T) {
	e := newEnv(t)
	j := e.nativeSubmit(`{"id": "native-1", "priority": 3, "job": ` + trainJob("echo first; echo from rank $RANK") + `}`)
	if j.ID != "native-1" || j.Priority != 3 || j.Status != StatusPending {
		t.Errorf("submitted job %+v", j)
	}
	e.waitStatus("native-1", store.Succeeded)

	d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/native-1", nil))
	if d.Job.Status != StatusSucceeded || d.Spec.Spec.RunName != "native-1" || d.Run == nil || len(d.Run.Attempts) != 1 {
		t.Fatalf("detail %+v", d)
	}
	rank0 := d.Run.Attempts[0].Ranks[0]
	if rank0.ExitCode == nil || *rank0.ExitCode != 0 || d.Run.Phase != v1.PhaseSucceeded {
		t.Errorf("run record: phase %s, rank 0 %+v", d.Run.Phase, rank0)
	}

	logs := e.request("GET", "/api/v1/jobs/native-1/logs?rank=0", nil)
	wantStatus(t, logs, http.StatusOK)
	if diff := cmp.Diff("first\nfrom rank 0\n", string(logs.body)); diff != "" {
		t.Errorf("rank 0's log (-want +got):\n%s", diff)
	}
	tail := e.request("GET", "/api/v1/jobs/native-1/logs?rank=0&tail=1", nil)
	if diff := cmp.Diff("from rank 0\n", string(tail.body)); diff != "" {
		t.Errorf("last line of rank 0's log (-want +got):\n%s", diff)
	}
	if console := e.request("GET", "/api/v1/jobs/native-1/logs", nil); !strings.Contains(string(console.body), "from rank 0") {
		t.Errorf("console log %q", console.body)
	}

	list := decode[JobList](t, e.request("GET", "/api/v1/jobs?status=succeeded,failed", nil))
	if len(list.Jobs) != 1 || list.Jobs[0].ID != "native-1" {
		t.Errorf("list of ended jobs: %+v", list)
	}
	if none := decode[JobList](t, e.request("GET", "/api/v1/jobs?status=RUNNING", nil)); len(none.Jobs) != 0 {
		t.Errorf("list of running jobs: %+v", none)
	}

	stop := e.request("POST", "/api/v1/jobs/native-1/stop", nil)
	wantStatus(t, stop, http.StatusConflict)
	errorMessage(t, stop)
	wantStatus(t, e.request("DELETE", "/api/v1/jobs/native-1", nil), http.StatusNoContent)
	wantStatus(t, e.request("GET", "/api/v1/jobs/native-1", nil), http.StatusNotFound)
}

// A list's total counts every job its statuses keep, however few ?limit= returns (issue
// 24: it was the rows returned unless ?offset= was given too).
func TestNativeListTotalWithLimit(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		e.nativeSubmit(`{"id": "` + id + `", "job": ` + trainJob("true") + `}`)
		e.waitStatus(id, store.Succeeded)
	}
	list := decode[JobList](t, e.request("GET", "/api/v1/jobs?status=SUCCEEDED&limit=1", nil))
	if len(list.Jobs) != 1 || list.Total != 3 {
		t.Errorf("?status=SUCCEEDED&limit=1: %d jobs, total %d; want 1 of 3", len(list.Jobs), list.Total)
	}
	if all := decode[JobList](t, e.request("GET", "/api/v1/jobs?limit=5", nil)); len(all.Jobs) != 3 || all.Total != 3 {
		t.Errorf("?limit=5: %d jobs, total %d; want 3 of 3", len(all.Jobs), all.Total)
	}
}

// The TrainJob may come as the job file itself, in YAML.
func TestNativeSubmitYAML(t *testing.T) {
	e := newEnv(t)
	yaml := fmt.Sprintf("apiVersion: %s\nkind: %s\nspec:\n  command: [sh, -c, 'echo from yaml']\n", v1.APIVersion, v1.Kind)
	r := e.request("POST", "/api/v1/jobs?id=yaml-1&priority=7", []byte(yaml), "Content-Type", "application/yaml")
	wantStatus(t, r, http.StatusCreated)
	if j := decode[Job](t, r); j.ID != "yaml-1" || j.Priority != 7 {
		t.Errorf("job %+v", j)
	}
	e.waitStatus("yaml-1", store.Succeeded)
}

// A running job is stopped; it cannot be deleted before (409).
func TestNativeStopRunning(t *testing.T) {
	e := newEnv(t)
	e.nativeSubmit(`{"id": "long", "job": ` + trainJob("exec sleep 300") + `}`)
	e.waitStatus("long", store.Running)
	del := e.request("DELETE", "/api/v1/jobs/long", nil)
	wantStatus(t, del, http.StatusConflict)
	if msg := errorMessage(t, del); !strings.Contains(msg, "stop it first") {
		t.Errorf("message %q", msg)
	}
	stop := e.request("POST", "/api/v1/jobs/long/stop", nil)
	wantStatus(t, stop, http.StatusOK)
	if j := decode[Job](t, stop); !j.StopRequested {
		t.Errorf("stopped job %+v, want stopRequested", j)
	}
	e.waitStatus("long", store.Stopped)
}

func TestNativeRefuses(t *testing.T) {
	e := newEnv(t)
	e.nativeSubmit(`{"id": "taken", "job": ` + trainJob("true") + `}`)
	e.waitStatus("taken", store.Succeeded)
	cases := map[string]struct {
		method, path, body, contentType string
		status                          int
		want                            string
	}{
		"unknown field":       {"POST", "/api/v1/jobs", `{"job": ` + trainJob("true") + `, "prio": 1}`, "", 400, `unknown field "prio"`},
		"unknown spec field":  {"POST", "/api/v1/jobs", `{"job": ` + trainJob("true", `"gpus": 1`) + `}`, "", 400, `unknown field "spec.gpus"`},
		"no job":              {"POST", "/api/v1/jobs", `{"priority": 1}`, "", 400, "job is required"},
		"malformed JSON":      {"POST", "/api/v1/jobs", `{"job": `, "", 400, "not valid JSON"},
		"wrong type":          {"POST", "/api/v1/jobs", `{"job": {}, "priority": "high"}`, "", 400, "priority: expected int, got string"},
		"invalid job":         {"POST", "/api/v1/jobs", `{"job": ` + trainJob("true", `"workers": 0`) + `}`, "", 400, "spec.workers: Invalid value: 0"},
		"relative workingDir": {"POST", "/api/v1/jobs", `{"job": ` + trainJob("true", `"workingDir": "src"`) + `}`, "", 400, "spec.workingDir"},
		"never fits":          {"POST", "/api/v1/jobs", `{"job": ` + trainJob("true", `"resources": {"gpu": 1}`) + `}`, "", 400, "can never run on this machine"},
		"duplicate":           {"POST", "/api/v1/jobs", `{"id": "taken", "job": ` + trainJob("true") + `}`, "", 409, "job already exists"},
		"bad id":              {"POST", "/api/v1/jobs", `{"id": "a b", "job": ` + trainJob("true") + `}`, "", 400, `id "a b"`},
		"media type":          {"POST", "/api/v1/jobs", `job`, "text/plain", 415, "send application/json"},
		"bad YAML":            {"POST", "/api/v1/jobs", "spec: [", "application/yaml", 400, "not valid YAML"},
		"bad status":          {"GET", "/api/v1/jobs?status=DONE", "", "", 400, `status "DONE"`},
		"bad limit":           {"GET", "/api/v1/jobs?limit=-1", "", "", 400, "limit"},
		"unknown job":         {"GET", "/api/v1/jobs/nope", "", "", 404, "no job with id or name 'nope'"},
		"stop unknown":        {"POST", "/api/v1/jobs/nope/stop", "", "", 404, "no job with id or name 'nope'"},
		"no such rank":        {"GET", "/api/v1/jobs/taken/logs?rank=5", "", "", 404, "has no rank 5"},
		"bad rank":            {"GET", "/api/v1/jobs/taken/logs?rank=x", "", "", 400, `rank "x"`},
		"no such endpoint":    {"GET", "/api/v2/jobs", "", "", 404, "no endpoint GET /api/v2/jobs"},
		"oversized":           {"POST", "/api/v1/jobs", strings.Repeat(" ", MaxBodyBytes+1), "", 413, "at most 1048576"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			var headers []string
			if c.contentType != "" {
				headers = []string{"Content-Type", c.contentType}
			}
			r := e.request(c.method, c.path, body, headers...)
			if r.status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.status, c.status, r.body)
			}
			if msg := errorMessage(t, r); !strings.Contains(msg, c.want) {
				t.Errorf("message %q, want it to contain %q", msg, c.want)
			}
		})
	}
}

// The detail holds the last result the job reported and its committed checkpoints.
func TestNativeDetailResultsAndCheckpoints(t *testing.T) {
	e := newEnv(t)
	j := e.nativeSubmit(`{"id": "trained", "job": ` + trainJob("true") + `}`)
	done := e.waitStatus(j.ID, store.Succeeded)
	results := `{"training_iteration": 1, "timestamp": "2026-01-02T03:04:05Z", "time_this_iter_s": 1, "time_total_s": 1, "attempt": 1, "loss": 0.9}
{"training_iteration": 2, "timestamp": "2026-01-02T03:04:06Z", "time_this_iter_s": 1, "time_total_s": 2, "attempt": 1, "loss": "NaN", "checkpoint": "checkpoint_000010"}
`
	writeFile(t, filepath.Join(done.RunDir, "result.json"), results)
	for _, name := range []string{"checkpoint_000010", "checkpoint_000002", "checkpoint_1000000"} {
		writeFile(t, filepath.Join(done.RunDir, name, checkpoint.ManifestName), "{}")
	}
	writeFile(t, filepath.Join(done.RunDir, "checkpoint_000003", "model.pt"), "uncommitted: no manifest")

	d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/trained", nil))
	if diff := cmp.Diff([]string{"checkpoint_000002", "checkpoint_000010", "checkpoint_1000000"}, d.Checkpoints); diff != "" {
		t.Errorf("checkpoints (-want +got):\n%s", diff)
	}
	if d.Results == nil {
		t.Fatal("no results")
	}
	got := fmt.Sprintf("%d %s %v %s", d.Results.Iteration, d.Results.Timestamp.Format(time.RFC3339), d.Results.Metrics, d.Results.Checkpoint)
	if diff := cmp.Diff("2 2026-01-02T03:04:06Z map[loss:NaN] checkpoint_000010", got); diff != "" {
		t.Errorf("last result (-want +got):\n%s", diff)
	}
}

// writeFile writes a file, creating its folder.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
