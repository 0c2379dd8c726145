package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/store"
)

// logBuffer collects the server's log as JSON lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the log lines whose msg is one of msgs, each as its key-values.
func (b *logBuffer) records(t *testing.T, msgs ...string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		for _, m := range msgs {
			if rec["msg"] == m {
				out = append(out, rec)
			}
		}
	}
	return out
}

// text returns the whole log.
func (b *logBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withLog makes the server log into b, at every level.
func withLog(b *logBuffer) option {
	return func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// Every submit, stop and delete, through either API, is one Info line with the client's
// address; every request refused with 401 or 403 is one Warn line, without the token.
func TestAuditTrail(t *testing.T) {
	var logs logBuffer
	e := newEnv(t, withLog(&logs))
	e.nativeSubmit(`{"id": "native-a", "job": ` + trainJob("sleep 30") + `}`)
	wantStatus(t, e.request("POST", "/api/v1/jobs/native-a/stop", nil), http.StatusOK)
	e.waitStatus("native-a", store.Stopped)
	wantStatus(t, e.request("DELETE", "/api/v1/jobs/native-a", nil), http.StatusNoContent)
	id := e.raySubmitJob(map[string]any{"entrypoint": "sleep 30", "submission_id": "ray-b"})
	wantStatus(t, e.request("POST", "/api/jobs/"+id+"/stop", nil), http.StatusOK)
	e.rayWait(id, "STOPPED")
	wantStatus(t, e.request("DELETE", "/api/jobs/"+id, nil), http.StatusOK)

	wrong := strings.Repeat("w", 43)
	wantStatus(t, e.do(mustRequest(t, "GET", e.web.URL+"/api/v1/jobs")), http.StatusUnauthorized)
	bad := mustRequest(t, "POST", e.web.URL+"/api/jobs/x/stop?token="+wrong)
	bad.Header.Set("Authorization", "Bearer "+wrong)
	wantStatus(t, e.do(bad), http.StatusForbidden)
	foreign := mustRequest(t, "GET", e.web.URL+"/api/jobs/")
	foreign.Host = "evil.example"
	foreign.Header.Set("Authorization", "Bearer "+testToken)
	wantStatus(t, e.do(foreign), http.StatusForbidden)

	type line struct{ Level, Msg, Action, Job, Method, Path string }
	var got []line
	for _, rec := range logs.records(t, "audit", "refused request") {
		if c, _ := rec["client"].(string); !strings.HasPrefix(c, "127.0.0.1:") {
			t.Errorf("log line %v: client %q, want the client's address", rec, c)
		}
		if rec["msg"] == "refused request" && rec["reason"] == "" {
			t.Errorf("log line %v has no reason", rec)
		}
		str := func(k string) string { s, _ := rec[k].(string); return s }
		got = append(got, line{str("level"), str("msg"), str("action"), str("job"), str("method"), str("path")})
	}
	want := []line{
		{"INFO", "audit", "submit", "native-a", "POST", "/api/v1/jobs"},
		{"INFO", "audit", "stop", "native-a", "POST", "/api/v1/jobs/native-a/stop"},
		{"INFO", "audit", "delete", "native-a", "DELETE", "/api/v1/jobs/native-a"},
		{"INFO", "audit", "submit", "ray-b", "POST", "/api/jobs/"},
		{"INFO", "audit", "stop", "ray-b", "POST", "/api/jobs/ray-b/stop"},
		{"INFO", "audit", "delete", "ray-b", "DELETE", "/api/jobs/ray-b"},
		{"WARN", "refused request", "", "", "GET", "/api/v1/jobs"},
		{"WARN", "refused request", "", "", "POST", "/api/jobs/x/stop"},
		{"WARN", "refused request", "", "", "GET", "/api/jobs/"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit trail (-want +got):\n%s", diff)
	}
	for _, secret := range []string{testToken, wrong} {
		if strings.Contains(logs.text(), secret) {
			t.Errorf("the log holds a token:\n%s", logs.text())
		}
	}
}

// A job may not keep its runs in the server's state folder, nor have a run folder that
// would hold it; symlinks do not get around it.
func TestSubmitRefusesStateFolder(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StoragePath = filepath.Dir(c.StateDir) })
	state := filepath.Join(e.dir, "state")
	link := filepath.Join(e.dir, "innocent")
	if err := os.Symlink(filepath.Join(state, "workdirs"), link); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		storage string
		want    []string
	}{
		"the state folder": {state, []string{"spec.storagePath " + state + " is the server's state folder " + state}},
		"inside it":        {state + "/runs/../runs", []string{"spec.storagePath " + state + "/runs ", "state folder " + state}},
		"through a symlink": {link + "/new/runs", []string{"spec.storagePath " + link + "/new/runs (" + state + "/workdirs/new/runs once symlinks are resolved)",
			"state folder " + state}},
		"a parent, with the folder's name as ID": {e.dir, []string{"the run folder " + state + " ", "would hold the server's state folder " + state}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.request("POST", "/api/v1/jobs", []byte(`{"id": "state", "job": `+trainJob("true", `"storagePath": "`+c.storage+`"`)+`}`))
			wantStatus(t, r, http.StatusBadRequest)
			msg := errorMessage(t, r)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q, want it to contain %q", msg, w)
				}
			}
		})
	}
	t.Run("Ray", func(t *testing.T) {
		r := e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "submission_id": "state"}))
		wantStatus(t, r, http.StatusBadRequest)
		if msg := errorMessage(t, r); !strings.Contains(msg, "the run folder "+state+" ") || !strings.Contains(msg, "state folder "+state) {
			t.Errorf("message %q, want it to name the run folder and the state folder %s", msg, state)
		}
	})
	if list, _ := e.svc.List(store.Filter{}); len(list) != 0 {
		t.Errorf("%d job(s) were accepted", len(list))
	}
}

// A job whose storage path another user could change (group-writable, not sticky) is
// refused at submission, as its supervisor would refuse it once it left the queue.
func TestSubmitRefusesUntrustedStorage(t *testing.T) {
	e := newEnv(t)
	shared := filepath.Join(e.dir, "team-runs")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, os.ModeSetgid|0o770); err != nil {
		t.Fatal(err)
	}
	r := e.request("POST", "/api/v1/jobs", []byte(`{"id": "shared", "job": `+trainJob("true", `"storagePath": "`+shared+`"`)+`}`))
	wantStatus(t, r, http.StatusBadRequest)
	if msg := errorMessage(t, r); !strings.Contains(msg, "spec.storagePath") || !strings.Contains(msg, "chmod +t") {
		t.Errorf("message %q, want it to name spec.storagePath and how to fix it", msg)
	}
	if err := os.Chmod(shared, os.ModeSetgid|os.ModeSticky|0o770); err != nil { // the README's team setup
		t.Fatal(err)
	}
	r = e.request("POST", "/api/v1/jobs", []byte(`{"id": "shared", "job": `+trainJob("true", `"storagePath": "`+shared+`"`)+`}`))
	wantStatus(t, r, http.StatusCreated)
}
