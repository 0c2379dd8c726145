package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/store"
)

// namedJob is a TrainJob document (JSON) named name that runs a shell script.
func namedJob(name, script string) string {
	return fmt.Sprintf(`{"apiVersion": %q, "kind": %q, "metadata": {"name": %q}, "spec": {"command": ["sh", "-c", %q]}}`,
		v1.APIVersion, v1.Kind, name, script)
}

// The native API finds a job by its name as by its ID, and a name is another job's only
// once that job is deleted.
func TestNativeJobByName(t *testing.T) {
	e := newEnv(t)
	j := e.nativeSubmit(`{"job": ` + namedJob("mnist", "echo hello; exec sleep 300") + `}`)
	if j.Name != "mnist" {
		t.Fatalf("submitted job %+v, want the name mnist", j)
	}

	again := e.request("POST", "/api/v1/jobs", []byte(`{"job": `+namedJob("mnist", "true")+`}`))
	wantStatus(t, again, http.StatusConflict)
	want := "a job named 'mnist' exists already (" + j.ID + "): names are unique among the server's jobs until a job is deleted; " +
		"choose another name, or delete that job first"
	if msg := errorMessage(t, again); msg != want {
		t.Errorf("second job named mnist: %q, want %q", msg, want)
	}

	d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/mnist", nil))
	if d.Job.ID != j.ID || d.Spec == nil || d.Spec.Name != "mnist" {
		t.Errorf("GET /api/v1/jobs/mnist: job %s (%+v), want %s", d.Job.ID, d.Spec, j.ID)
	}
	e.waitStatus(j.ID, store.Running)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(25 * time.Millisecond) {
		logs := e.request("GET", "/api/v1/jobs/mnist/logs", nil)
		wantStatus(t, logs, http.StatusOK)
		if strings.Contains(string(logs.body), "hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/v1/jobs/mnist/logs: %q, want the job's console log", logs.body)
		}
	}
	// Ray's endpoints take IDs only, as Ray's do.
	wantStatus(t, e.request("GET", "/api/jobs/mnist", nil), http.StatusNotFound)

	stop := decode[Job](t, e.request("POST", "/api/v1/jobs/mnist/stop", nil))
	if stop.ID != j.ID {
		t.Errorf("POST /api/v1/jobs/mnist/stop stopped %s, want %s", stop.ID, j.ID)
	}
	e.waitStatus(j.ID, store.Stopped)
	wantStatus(t, e.request("DELETE", "/api/v1/jobs/mnist", nil), http.StatusNoContent)
	gone := e.request("GET", "/api/v1/jobs/mnist", nil)
	wantStatus(t, gone, http.StatusNotFound)
	if msg, want := errorMessage(t, gone), "no job with id or name 'mnist' (trainyard list shows the jobs)"; msg != want {
		t.Errorf("GET of a deleted name: %q, want %q", msg, want)
	}
	next := e.nativeSubmit(`{"job": ` + namedJob("mnist", "true") + `}`)
	if next.ID == j.ID || next.Name != "mnist" {
		t.Errorf("the name of a deleted job: %+v", next)
	}
}

// A name that several jobs have (as jobs submitted before names were unique may) is
// refused with their IDs; an ID comes before a name.
func TestNativeJobByAmbiguousName(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"old-1", "old-2", "sweep-2"} {
		name := "sweep"
		if id == "sweep-2" {
			name = "other"
		}
		err := e.store.Create(&store.Job{ID: id, Name: name, Status: store.Succeeded, Spec: []byte(trainJob("true"))})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"/api/v1/jobs/sweep", "/api/v1/jobs/sweep/logs"} {
		r := e.request("GET", path, nil)
		wantStatus(t, r, http.StatusConflict)
		if msg, want := errorMessage(t, r), "2 jobs are named 'sweep': old-1, old-2; give the ID of one of them"; msg != want {
			t.Errorf("GET %s: %q, want %q", path, msg, want)
		}
	}
	wantStatus(t, e.request("DELETE", "/api/v1/jobs/sweep", nil), http.StatusConflict)
	if d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/sweep-2", nil)); d.Job.ID != "sweep-2" {
		t.Errorf("GET /api/v1/jobs/sweep-2: job %s", d.Job.ID)
	}
	if d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/other", nil)); d.Job.ID != "sweep-2" {
		t.Errorf("GET /api/v1/jobs/other: job %s", d.Job.ID)
	}
}
