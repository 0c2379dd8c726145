package server

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/store"
)

// Ray takes almost any string as submission_id. Each works through every endpoint, with
// the ID escaped in URLs, and names no path: the run folder and the spec file are named by
// jobs.FolderName, inside the storage path and the state folder.
func TestRayAnySubmissionID(t *testing.T) {
	e := newEnv(t)
	ids := []string{"raysubmit_fPOmfwdHK5QGnJKC", "...", "..a", `a\b`, "has space", "ünïcødé ジョブ", "100%", "q?x=1#f",
		strings.Repeat("long-", 2000)}
	runs := filepath.Join(e.dir, "runs")
	for _, id := range ids {
		got := e.raySubmitJob(map[string]any{"entrypoint": "echo ran", "submission_id": id})
		if got != id {
			t.Fatalf("submitted %q, got the ID %q", truncate(id, 40), truncate(got, 40))
		}
		d := e.rayWait(id, "SUCCEEDED")
		if d["submission_id"] != id {
			t.Errorf("JobDetails submission_id %q, want %q", d["submission_id"], truncate(id, 40))
		}
		path := "/api/jobs/" + url.PathEscape(id)
		logs := decode[map[string]string](t, e.request("GET", path+"/logs", nil))
		if !strings.Contains(logs["logs"], "ran") {
			t.Errorf("%s: logs %q", truncate(id, 40), logs["logs"])
		}
		j, err := e.svc.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(runs, jobs.FolderName(id)); j.RunDir != want {
			t.Errorf("run folder %s, want %s", j.RunDir, want)
		}
		wantStatus(t, e.request("POST", path+"/stop", nil), http.StatusOK)
		wantStatus(t, e.request("DELETE", path, nil), http.StatusOK)
		wantStatus(t, e.request("GET", path, nil), http.StatusNotFound)
	}
	// Nothing was made outside the storage path and the state folder.
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if n := en.Name(); n != "runs" && n != "state" {
			t.Errorf("%s was made in %s", n, e.dir)
		}
	}
	runEntries, _ := os.ReadDir(runs)
	if len(runEntries) != len(ids) {
		t.Errorf("%d run folders, want %d", len(runEntries), len(ids))
	}
}

// An ID that no URL could name again ("." and ".." are dropped from paths, and Ray's
// clients put the ID in the path unescaped, so "/" splits it) is refused with what to do.
func TestRaySubmissionIDNotAPathSegment(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{".", "..", "/", "a/b", "../../etc", "a/"} {
		for _, field := range []string{"submission_id", "job_id"} {
			r := e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", field: id}))
			wantStatus(t, r, http.StatusBadRequest)
			if msg := errorMessage(t, r); !strings.Contains(msg, "no URL could name the job") {
				t.Errorf("%s %q: message %q", field, id, msg)
			}
		}
	}
	if n, _ := e.svc.List(store.Filter{}); len(n) != 0 {
		t.Errorf("%d jobs were made", len(n))
	}
}

// An ID over the store's bound is refused with what to do.
func TestRaySubmissionIDTooLong(t *testing.T) {
	e := newEnv(t)
	r := e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "submission_id": strings.Repeat("x", maxRayIDBytes+1)}))
	wantStatus(t, r, http.StatusBadRequest)
	if msg := errorMessage(t, r); !strings.Contains(msg, "at most 16384 bytes") {
		t.Errorf("message %q", msg)
	}
}
