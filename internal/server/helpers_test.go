package server

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/testbinary"
	"github.com/trainyard/trainyard/internal/upload"
)

var binary string // trainyard, built once: every job's supervisor is `trainyard run`

func TestMain(m *testing.M) { testbinary.Main(m, &binary) }

// testToken is the server's token in tests.
const testToken = "dGVzdC10b2tlbi1mb3ItdGhlLXRyYWlueWFyZC1zZXJ2ZXI"

// testNode is the machine of the tests: 2 cores, 8 GiB, no GPU.
var testNode = scheduler.Node{MilliCPU: 2000, MemoryBytes: 8 << 30}

// env is a real server: a jobs.Service over a fresh store whose jobs run as `trainyard
// run` supervisors, behind an httptest.Server.
type env struct {
	t   *testing.T
	dir string
	srv *Server
	web *httptest.Server
	svc *jobs.Service
	// store is the jobs.Service's store, for jobs the API could not make.
	store *store.Store
}

// option changes the server's Config before it starts.
type option func(*Config)

// newEnv starts a server; opts change its Config, whose Node.Resources is also the
// machine the jobs.Service schedules on.
func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	state := filepath.Join(e.dir, "state")
	cfg := Config{Token: testToken, StateDir: state, StoragePath: filepath.Join(e.dir, "runs"),
		Node: NodeConfig{Resources: testNode}, Version: "test"}
	for _, o := range opts {
		o(&cfg)
	}
	st, err := store.Open(filepath.Join(state, "jobs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.svc, err = jobs.New(jobs.Config{Store: st, StateDir: state, Binary: binary, Node: cfg.Node.Resources,
		Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := e.svc.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	if cfg.Packages, err = upload.NewStore(filepath.Join(state, "packages")); err != nil {
		t.Fatal(err)
	}
	cfg.Jobs = e.svc
	if e.srv, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	e.web = httptest.NewServer(e.srv.Handler())
	t.Cleanup(func() {
		e.stopAll()
		e.web.Close()
		cancel()
		<-stopped
		st.Close()
	})
	return e
}

// stopAll stops the jobs still pending or running, so that no supervisor outlives a test.
// It checks again until none is left for a while: a pending job stopped just as the
// scheduler starts it comes back RUNNING (jobs.Service's start does not look at the
// status it overwrites).
func (e *env) stopAll() {
	stopped, quiet := false, 0
	for {
		list, _ := e.svc.List(store.Filter{Statuses: []store.Status{store.Pending, store.Running}})
		if len(list) == 0 {
			if !stopped || quiet == 3 {
				return
			}
			quiet++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		stopped, quiet = true, 0
		for _, j := range list {
			_, _ = e.svc.Stop(j.ID)
		}
		for _, j := range list {
			e.waitStatus(j.ID, store.Stopped, store.Succeeded, store.Failed)
		}
	}
}

// response is what the server answered.
type response struct {
	path   string // the request's path
	status int
	header http.Header
	body   []byte
}

// request sends a request with the token; headers are name, value pairs.
func (e *env) request(method, path string, body []byte, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.web.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return e.do(req)
}

// do sends a request as it is.
func (e *env) do(req *http.Request) response {
	e.t.Helper()
	resp, err := e.web.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{path: req.URL.Path, status: resp.StatusCode, header: resp.Header, body: data}
}

// jsonBody encodes v, failing the test on error.
func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decode decodes a response body as JSON into v, failing the test when it is not.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return v
}

// wantStatus fails the test unless the response has the status.
func wantStatus(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.body)
	}
}

// errorMessage checks that r is an error as its API writes them and returns its message:
// on Ray's paths, Ray's text/plain body, the message exactly; on the others, a one-line
// JSON body {"error": "..."}.
func errorMessage(t *testing.T, r response) string {
	t.Helper()
	if isRayPath(r.path) {
		return rayErrorMessage(t, r)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if strings.Count(string(r.body), "\n") != 1 || !strings.HasSuffix(string(r.body), "\n") {
		t.Errorf("error body is not one line: %q", r.body)
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	msg, ok := body["error"].(string)
	if len(body) != 1 || !ok || msg == "" {
		t.Errorf("error body %s, want exactly {\"error\": \"...\"}", r.body)
	}
	return msg
}

// rayErrorMessage checks that r is an error as Ray's dashboard writes them, aiohttp's
// Response(text=msg): text/plain in UTF-8, the body the message and nothing else.
func rayErrorMessage(t *testing.T, r response) string {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q, want Ray's text/plain; charset=utf-8", ct)
	}
	msg := string(r.body)
	if msg == "" || json.Valid(r.body) || strings.HasSuffix(msg, "\n") {
		t.Errorf("error body %q, want Ray's: the message as text, without a newline", msg)
	}
	return msg
}

// waitStatus waits until the job's status is one of want, and returns the job.
func (e *env) waitStatus(id string, want ...store.Status) *store.Job {
	e.t.Helper()
	var j *store.Job
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		var err error
		if j, err = e.svc.Get(id); err != nil {
			e.t.Fatalf("job %s: %v", id, err)
		}
		for _, w := range want {
			if j.Status == w {
				return j
			}
		}
	}
	e.t.Fatalf("job %s is %s (%s), want %v", id, j.Status, j.Message, want)
	return nil
}

// makeZip returns a zip archive of the given files (name -> content).
func makeZip(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// storeStatus is a job's status as the store holds it.
func (e *env) storeStatus(id string) store.Status {
	e.t.Helper()
	j, err := e.svc.Get(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j.Status
}
