package server

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// Requests are refused without the token, with a wrong one, or naming another Host;
// /healthz answers without a token; Ray's own header carries the token too.
func TestAuth(t *testing.T) {
	e := newEnv(t)
	cases := map[string]struct {
		method, path string
		header       []string // name, value
		host         string
		status       int
	}{
		"no token":                {"GET", "/api/jobs/", nil, "", 401},
		"wrong token":             {"GET", "/api/jobs/", []string{"Authorization", "Bearer " + strings.Repeat("x", 43)}, "", 403},
		"token in the query":      {"GET", "/api/jobs/?token=" + testToken, nil, "", 401},
		"foreign Host":            {"GET", "/api/jobs/", []string{"Authorization", "Bearer " + testToken}, "evil.example", 403},
		"foreign Host on healthz": {"GET", "/healthz", nil, "evil.example:80", 403},
		"token":                   {"GET", "/api/jobs/", []string{"Authorization", "Bearer " + testToken}, "", 200},
		"Ray's header":            {"GET", "/api/version", []string{"X-Ray-Authorization", "Bearer " + testToken}, "", 200},
		"healthz without token":   {"GET", "/healthz", nil, "", 200},
		"metrics without token":   {"GET", "/metrics", nil, "", 401},
		"submit without token":    {"POST", "/api/jobs/", nil, "", 401},
		"native without token":    {"GET", "/api/v1/node", nil, "", 401},
		"package without token":   {"PUT", "/api/packages/gcs/_ray_pkg_a.zip", nil, "", 401},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, e.web.URL+c.path, bytes.NewReader([]byte(`{"entrypoint": "true"}`)))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(c.header); i += 2 {
				req.Header.Set(c.header[i], c.header[i+1])
			}
			if c.host != "" {
				req.Host = c.host
			}
			r := e.do(req)
			if r.status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.status, c.status, r.body)
			}
			if c.status >= 400 {
				errorMessage(t, r)
			}
		})
	}
	if r := e.do(mustRequest(t, "GET", e.web.URL+"/healthz")); string(r.body) != "ok\n" {
		t.Errorf("healthz says %q, want only ok", r.body)
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// /metrics counts jobs by status, the GPUs, the restarts of the gang and the queue wait.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	// Fails its first attempt, succeeds in the second: one restart.
	e.nativeSubmit(`{"id": "flaky", "job": ` + trainJob("if [ -f marker ]; then echo ok; else touch marker; exit 1; fi", `"maxRestarts": 1`) + `}`)
	e.waitStatus("flaky", store.Succeeded)
	e.raySubmitJob(map[string]any{"entrypoint": "exit 1", "submission_id": "broken"})
	e.waitStatus("broken", store.Failed)

	r := e.request("GET", "/metrics", nil)
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	got := samples(t, string(r.body))
	want := map[string]string{
		`trainyard_jobs{status="PENDING"}`:               "0",
		`trainyard_jobs{status="RUNNING"}`:               "0",
		`trainyard_jobs{status="STOPPED"}`:               "0",
		`trainyard_jobs{status="SUCCEEDED"}`:             "1",
		`trainyard_jobs{status="FAILED"}`:                "1",
		`trainyard_gpus_total`:                           "0",
		`trainyard_gpus_allocated`:                       "0",
		`trainyard_job_restarts_total`:                   "1",
		`trainyard_queue_wait_seconds_bucket{le="+Inf"}`: "2",
		`trainyard_queue_wait_seconds_count`:             "2",
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			delete(got, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s\n%s", diff, r.body)
	}
	for _, family := range []string{"trainyard_jobs gauge", "trainyard_job_restarts_total counter", "trainyard_queue_wait_seconds histogram"} {
		if !strings.Contains(string(r.body), "# TYPE "+family+"\n") {
			t.Errorf("no TYPE line for %s", family)
		}
	}
}

// samples reads the samples of a Prometheus text exposition: series -> value.
func samples(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("malformed sample %q", line)
		}
		out[line[:i]] = line[i+1:]
	}
	return out
}

// /api/v1/node reports what running jobs hold of the machine, and the utilization hook.
func TestNode(t *testing.T) {
	use := []GPUUtilization{{Index: 0, Percent: 87.5, MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 80 << 30}}
	e := newEnv(t, func(c *Config) {
		c.Node = NodeConfig{Resources: scheduler.Node{GPUs: []int{1, 0, 1}, MilliCPU: 2000, MemoryBytes: 8 << 30},
			Utilization: func(context.Context) ([]GPUUtilization, error) { return use, nil }}
	})
	e.nativeSubmit(`{"id": "busy", "job": ` + trainJob("exec sleep 300", `"resources": {"cpu": "1500m", "memory": "1Gi"}`) + `}`)
	e.waitStatus("busy", store.Running)
	got := decode[Node](t, e.request("GET", "/api/v1/node", nil))
	want := Node{
		GPUs:        GPUs{Amount: Amount{Total: 2, Allocated: 0, Free: 2}, Indices: []int{0, 1}, Utilization: use},
		MilliCPU:    Amount{Total: 2000, Allocated: 1500, Free: 500},
		MemoryBytes: Amount{Total: 8 << 30, Allocated: 1 << 30, Free: 7 << 30},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
}
