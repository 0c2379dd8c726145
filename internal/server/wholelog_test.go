package server

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/store"
)

// ?whole=1 sends a log of more than 16 MiB whole, where the plain answer holds its end.
func TestWholeLog(t *testing.T) {
	e := newEnv(t)
	e.nativeSubmit(`{"id": "long", "job": ` + trainJob("echo short") + `}`)
	e.waitStatus("long", store.Succeeded)
	j, err := e.store.Get("long")
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte("x"), 99)
	var big bytes.Buffer
	for big.Len() <= maxLogBytes+(1<<20) {
		big.Write(line)
		big.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(j.RunDir, jobs.ConsoleLog), big.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	whole := e.request("GET", "/api/v1/jobs/long/logs?whole=1", nil)
	wantStatus(t, whole, http.StatusOK)
	if !bytes.Equal(whole.body, big.Bytes()) {
		t.Errorf("whole=1 sent %d bytes, want the log's %d", len(whole.body), big.Len())
	}
	if end := e.request("GET", "/api/v1/jobs/long/logs", nil); len(end.body) > maxLogBytes+200 {
		t.Errorf("the plain answer sent %d bytes, want its last 16 MiB", len(end.body))
	}
	wantStatus(t, e.request("GET", "/api/v1/jobs/long/logs?whole=1&tail=3", nil), http.StatusBadRequest)
}
