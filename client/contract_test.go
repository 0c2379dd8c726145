package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/server"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/upload"
)

// newRealServer starts the real HTTP layer over a jobs.Service that never runs its
// scheduler, so jobs stay PENDING and no process starts: the client's calls meet the
// server's own decoding, errors and status codes.
func newRealServer(t *testing.T) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "jobs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	node := scheduler.Node{GPUs: []int{0, 1}, MilliCPU: 4000, MemoryBytes: 8 << 30}
	svc, err := jobs.New(jobs.Config{Store: st, Node: node, StateDir: dir, Binary: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := upload.NewStore(filepath.Join(dir, "packages"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Jobs: svc, Token: testToken, Packages: pkgs, StateDir: filepath.Join(dir, "state"),
		StoragePath: filepath.Join(dir, "runs"), Node: server.NodeConfig{Resources: node}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(srv.Handler())
	t.Cleanup(web.Close)
	return web
}

// trainJob is the smallest job: one worker running true.
func trainJob(name string, gpus int32) *v1.TrainJob {
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"true"}, Resources: v1.WorkerResources{GPU: gpus}}}
	job.APIVersion, job.Kind, job.Name = v1.APIVersion, v1.Kind, name
	return job
}

// A job's life through the client against the real server: submit, list, get, logs,
// stop, delete; and the server's refusals arrive as APIErrors with its status.
func TestAgainstServer(t *testing.T) {
	web := newRealServer(t)
	c := New(web.URL, testToken)
	ctx := context.Background()

	if v, err := c.Version(ctx); err != nil || v.Trainyard != "test" || v.APIVersion == "" {
		t.Fatalf("Version: %+v, %v", v, err)
	}
	job, err := c.Submit(ctx, SubmitRequest{ID: "job-1", Job: trainJob("hello", 1), Priority: 3})
	if err != nil {
		t.Fatal(err)
	}
	if job.ID != "job-1" || job.Name != "hello" || job.Status != StatusPending || job.Priority != 3 {
		t.Errorf("submitted job: %+v", job)
	}
	list, err := c.List(ctx, StatusPending)
	if err != nil || len(list) != 1 || list[0].ID != "job-1" {
		t.Errorf("List(PENDING) = %+v, %v; want job-1", list, err)
	}
	if list, err := c.List(ctx, StatusRunning); err != nil || len(list) != 0 {
		t.Errorf("List(RUNNING) = %+v, %v; want none", list, err)
	}
	d, err := c.Get(ctx, "job-1")
	if err != nil || d.Spec == nil || d.Spec.Spec.Resources.GPU != 1 {
		t.Errorf("Get: %+v, %v", d, err)
	}
	if text, err := c.Logs(ctx, "job-1", LogOptions{}); err != nil || text != "" {
		t.Errorf("Logs of a pending job: %q, %v; want an empty log", text, err)
	}
	n, err := c.Node(ctx)
	if err != nil || n.GPUs.Total != 2 || n.MilliCPU.Total != 4000 {
		t.Errorf("Node: %+v, %v", n, err)
	}
	wantRefusal(t, "delete a pending job", c.Delete(ctx, "job-1"), http.StatusConflict, "stop it first")
	if job, err := c.Stop(ctx, "job-1"); err != nil || job.Status != StatusStopped {
		t.Errorf("Stop of a pending job: %+v, %v; want it STOPPED", job, err)
	}
	_, err = c.Stop(ctx, "job-1")
	wantRefusal(t, "stop a stopped job", err, http.StatusConflict, "already finished")
	if err := c.Delete(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, "job-1")
	wantRefusal(t, "get a deleted job", err, http.StatusNotFound, "no job with id or name 'job-1'")
	_, err = c.Submit(ctx, SubmitRequest{Job: trainJob("big", 3)})
	wantRefusal(t, "a job that can never fit", err, http.StatusBadRequest, "GPU")
	_, err = c.List(ctx, "LOST")
	wantRefusal(t, "an unknown status", err, http.StatusBadRequest, `status "LOST"`)
	_, err = New(web.URL, "").List(ctx)
	wantRefusal(t, "no token", err, http.StatusUnauthorized, "missing token")
	_, err = New(web.URL, "x"+testToken).List(ctx)
	if !errors.Is(err, ErrNotTheServer) {
		t.Errorf("a wrong token: error %v, want one that says the server is not the token's", err)
	}
}

// wantRefusal fails the test unless err is an APIError with the status whose message
// holds text.
func wantRefusal(t *testing.T, what string, err error, status int, text string) {
	t.Helper()
	ae, ok := err.(*APIError)
	if !ok {
		t.Errorf("%s: error %v (%T), want an *APIError", what, err, err)
		return
	}
	if ae.Status != status || !strings.Contains(ae.Message, text) {
		t.Errorf("%s: %d %q, want %d with %q", what, ae.Status, ae.Message, status, text)
	}
}
