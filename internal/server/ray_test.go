package server

import (
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Contract tests of Ray's Jobs REST API, written from Ray's OpenAPI specification
// (doc/source/cluster/running-applications/job-submission/openapi.yml) and its server
// (dashboard/modules/job/job_head.py, job_agent.py, common.py, pydantic_models.py).

// jobDetailsKeys are the fields of Ray's JobDetails, all present in every answer.
var jobDetailsKeys = []string{"driver_agent_http_address", "driver_exit_code", "driver_info", "driver_node_id",
	"end_time", "entrypoint", "error_type", "job_id", "message", "metadata", "runtime_env", "start_time",
	"status", "submission_id", "type"}

// raySubmitJob submits a Ray job and returns its submission ID.
func (e *env) raySubmitJob(body map[string]any) string {
	e.t.Helper()
	r := e.request("POST", "/api/jobs/", jsonBody(e.t, body))
	wantStatus(e.t, r, http.StatusOK)
	got := decode[map[string]string](e.t, r)
	if got["submission_id"] == "" || got["job_id"] != got["submission_id"] || len(got) != 2 {
		e.t.Fatalf("JobSubmitResponse %s, want {\"job_id\": id, \"submission_id\": id}", r.body)
	}
	return got["submission_id"]
}

// rayDetails gets a job's JobDetails, checking that it has exactly Ray's fields.
func (e *env) rayDetails(id string) map[string]any {
	e.t.Helper()
	r := e.request("GET", "/api/jobs/"+url.PathEscape(id), nil)
	wantStatus(e.t, r, http.StatusOK)
	d := decode[map[string]any](e.t, r)
	if diff := cmp.Diff(jobDetailsKeys, slices.Sorted(maps.Keys(d))); diff != "" {
		e.t.Errorf("JobDetails fields (-want +got):\n%s", diff)
	}
	return d
}

// rayWait polls GET /api/jobs/{id}, as Ray's clients do, until the status is want.
func (e *env) rayWait(id, want string) map[string]any {
	e.t.Helper()
	var d map[string]any
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if d = e.rayDetails(id); d["status"] == want {
			return d
		}
	}
	e.t.Fatalf("job %s: %v, want status %s", id, d, want)
	return nil
}

func TestRayVersion(t *testing.T) {
	e := newEnv(t)
	r := e.request("GET", "/api/version", nil)
	wantStatus(t, r, http.StatusOK)
	want := map[string]string{"version": "4", "ray_version": rayRelease, "ray_commit": "trainyard-test",
		"session_name": "trainyard", "trainyard_version": "test"}
	if diff := cmp.Diff(want, decode[map[string]string](t, r)); diff != "" {
		t.Errorf("GET /api/version (-want +got):\n%s", diff)
	}
}

// A job runs to SUCCEEDED; its details, logs and place in the list are Ray's; stopping
// it then answers false; deleting it removes it.
func TestRaySubmitRunsJob(t *testing.T) {
	e := newEnv(t)
	before := time.Now().UnixMilli()
	id := e.raySubmitJob(map[string]any{"entrypoint": "echo hello", "runtime_env": map[string]any{},
		"metadata": map[string]string{"owner": "ada"}})
	if !regexp.MustCompile(`^raysubmit_[A-Za-z0-9]{16}$`).MatchString(id) {
		t.Errorf("generated submission_id %q is not of Ray's form", id)
	}
	d := e.rayWait(id, "SUCCEEDED")
	want := map[string]any{"type": "SUBMISSION", "job_id": nil, "submission_id": id, "driver_info": nil,
		"status": "SUCCEEDED", "entrypoint": "echo hello", "error_type": nil, "metadata": map[string]any{"owner": "ada"},
		"runtime_env": map[string]any{}, "driver_agent_http_address": nil, "driver_node_id": nil, "driver_exit_code": 0.0}
	got := maps.Clone(d)
	for _, k := range []string{"message", "start_time", "end_time"} {
		delete(got, k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobDetails (-want +got):\n%s", diff)
	}
	start, end := d["start_time"].(float64), d["end_time"].(float64)
	if start < float64(before) || end < start || end > float64(time.Now().UnixMilli()) {
		t.Errorf("start_time %v, end_time %v: want ms timestamps, submitted after %d", start, end, before)
	}

	logs := decode[map[string]string](t, e.request("GET", "/api/jobs/"+id+"/logs", nil))
	if len(logs) != 1 || !strings.Contains(logs["logs"], "hello") {
		t.Errorf("JobLogsResponse %v, want {\"logs\": ...hello...}", logs)
	}
	list := decode[[]map[string]any](t, e.request("GET", "/api/jobs/", nil))
	if len(list) != 1 || list[0]["submission_id"] != id {
		t.Errorf("GET /api/jobs/ = %v, want a list holding job %s", list, id)
	}
	stop := e.request("POST", "/api/jobs/"+id+"/stop", nil)
	if diff := cmp.Diff(map[string]bool{"stopped": false}, decode[map[string]bool](t, stop)); diff != "" || stop.status != 200 {
		t.Errorf("stop of a finished job: status %d (-want +got):\n%s", stop.status, diff)
	}
	del := e.request("DELETE", "/api/jobs/"+id, nil)
	if diff := cmp.Diff(map[string]bool{"deleted": true}, decode[map[string]bool](t, del)); diff != "" || del.status != 200 {
		t.Errorf("delete of a finished job: status %d (-want +got):\n%s", del.status, diff)
	}
	gone := e.request("GET", "/api/jobs/"+id, nil)
	wantStatus(t, gone, http.StatusNotFound)
	if msg := errorMessage(t, gone); msg != "Job "+id+" does not exist" {
		t.Errorf("404 message %q, want Ray's", msg)
	}
}

// A running job cannot be deleted (500, as Ray answers); stopping it answers true and it
// ends STOPPED with Ray's message; then it can be deleted.
func TestRayStopAndDeleteRunningJob(t *testing.T) {
	e := newEnv(t)
	r := e.request("POST", "/api/jobs", jsonBody(t, map[string]any{"entrypoint": "exec sleep 300", "submission_id": "sleeper-1"}))
	wantStatus(t, r, http.StatusOK)
	e.rayWait("sleeper-1", "RUNNING")

	del := e.request("DELETE", "/api/jobs/sleeper-1", nil)
	wantStatus(t, del, http.StatusInternalServerError)
	if msg := errorMessage(t, del); !strings.Contains(msg, "but it is in a non-terminal state RUNNING") {
		t.Errorf("delete of a running job: %q", msg)
	}
	stop := e.request("POST", "/api/jobs/sleeper-1/stop", nil)
	if diff := cmp.Diff(map[string]bool{"stopped": true}, decode[map[string]bool](t, stop)); diff != "" {
		t.Errorf("stop of a running job (-want +got):\n%s", diff)
	}
	d := e.rayWait("sleeper-1", "STOPPED")
	if d["message"] != "Job was intentionally stopped." {
		t.Errorf("message %q, want Ray's for STOPPED", d["message"])
	}
	wantStatus(t, e.request("DELETE", "/api/jobs/sleeper-1", nil), http.StatusOK)
}

// A failed job has Ray's error_type and the entrypoint's exit code.
func TestRayFailedJob(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": "echo oops >&2; exit 3"})
	d := e.rayWait(id, "FAILED")
	if d["error_type"] != rayErrorEntrypoint || d["driver_exit_code"] != 3.0 {
		t.Errorf("error_type %v, driver_exit_code %v; want %s and 3", d["error_type"], d["driver_exit_code"], rayErrorEntrypoint)
	}
}

func TestRayDuplicateSubmissionID(t *testing.T) {
	e := newEnv(t)
	e.raySubmitJob(map[string]any{"entrypoint": "true", "submission_id": "twice"})
	e.rayWait("twice", "SUCCEEDED")
	r := e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "submission_id": "twice"}))
	// Ray's dashboard answers 500, and KubeRay takes only a 500 with this text for "already
	// submitted" (dashboard_httpclient.go, SubmitJobReq).
	wantStatus(t, r, http.StatusInternalServerError)
	want := "Job with submission_id twice already exists. Please use a different submission_id."
	if msg := errorMessage(t, r); msg != want {
		t.Errorf("message %q, want Ray's %q", msg, want)
	}
	// The deprecated job_id names the job when submission_id does not.
	r = e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "job_id": "twice"}))
	wantStatus(t, r, http.StatusInternalServerError)
}

func TestRayUnknownJob(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/jobs/nope"},
		{"POST", "/api/jobs/nope/stop"},
		{"DELETE", "/api/jobs/nope"},
		{"GET", "/api/jobs/nope/logs"},
		{"GET", "/api/jobs/nope/logs/tail"},
	} {
		r := e.request(c.method, c.path, nil)
		if r.status != http.StatusNotFound || errorMessage(t, r) != "Job nope does not exist" {
			t.Errorf("%s %s: %d %s, want 404 and Ray's message", c.method, c.path, r.status, r.body)
		}
	}
}

// Ray ignores keys whose value is null: Ray's own clients send none, others may.
func TestRaySubmitIgnoresNulls(t *testing.T) {
	e := newEnv(t)
	r := e.request("POST", "/api/jobs/", []byte(`{"entrypoint": "true", "submission_id": null, "job_id": null,
		"runtime_env": null, "metadata": null, "entrypoint_num_gpus": null, "retry_policy": null}`))
	wantStatus(t, r, http.StatusOK)
	e.rayWait(decode[map[string]string](t, r)["submission_id"], "SUCCEEDED")
}

// runtime_env.env_vars reach the job, and the resources become the TrainJob's.
func TestRaySubmitEnvAndResources(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": `echo "greeting=$GREETING"`, "entrypoint_num_cpus": 0.5,
		"entrypoint_memory": 1 << 30, "entrypoint_num_gpus": 0, "runtime_env": map[string]any{
			"env_vars": map[string]string{"GREETING": "hi there"}, "excludes": []string{"*.pt"}}})
	e.rayWait(id, "SUCCEEDED")
	logs := decode[map[string]string](t, e.request("GET", "/api/jobs/"+id+"/logs", nil))
	if !strings.Contains(logs["logs"], "greeting=hi there") {
		t.Errorf("logs %q lack the env var", logs["logs"])
	}
	d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/"+id, nil))
	type shape struct {
		Command         []string
		Workers, Procs  int32
		CPU, Memory     string
		GPU             int32
		Env             []v1.EnvVar
		RunName         string
		StorageInRunDir bool
	}
	sp := d.Spec.Spec
	got := shape{Command: sp.Command, Workers: *sp.Workers, Procs: *sp.ProcsPerWorker, CPU: sp.Resources.CPU.String(),
		Memory: sp.Resources.Memory.String(), GPU: sp.Resources.GPU, Env: sp.Env, RunName: sp.RunName,
		StorageInRunDir: d.Job.RunDir == filepath.Join(e.dir, "runs", id)}
	want := shape{Command: []string{"/bin/sh", "-c", `echo "greeting=$GREETING"`}, Workers: 1, Procs: 1, CPU: "500m",
		Memory: "1Gi", Env: []v1.EnvVar{{Name: "GREETING", Value: "hi there"}}, RunName: id, StorageInRunDir: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the TrainJob of a Ray submission (-want +got):\n%s", diff)
	}
}
