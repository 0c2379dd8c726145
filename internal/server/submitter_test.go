package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/store"
)

// Who submitted a job: the user@host a trainyard client names, sanitized and bounded, and
// the address it came from; a Ray client's address alone.
func TestSubmittedBy(t *testing.T) {
	e := newEnv(t)
	j := e.nativeSubmit(`{"id": "who-1", "job": ` + trainJob("true") + `}`)
	if j.SubmittedBy != "127.0.0.1" {
		t.Errorf("no header: SubmittedBy %q, want the address", j.SubmittedBy)
	}
	r := e.request("POST", "/api/v1/jobs", []byte(`{"id": "who-2", "job": `+trainJob("true")+`}`),
		HeaderUser, "alice@gpu-box<script>"+strings.Repeat("x", 200))
	wantStatus(t, r, http.StatusCreated)
	got := decode[Job](t, r).SubmittedBy
	if !strings.HasPrefix(got, "alice@gpu-boxscriptxxx") || !strings.HasSuffix(got, " from 127.0.0.1") || len(got) > maxSubmitter+20 {
		t.Errorf("SubmittedBy %q: want the named user, sanitized and bounded, and the address", got)
	}
	r = e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "submission_id": "who-ray"}))
	wantStatus(t, r, http.StatusOK)
	if j := e.waitStatus("who-ray", store.Succeeded); j.SubmittedBy != "127.0.0.1" {
		t.Errorf("a Ray client's job: SubmittedBy %q", j.SubmittedBy)
	}
}
