package server

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/rundir"
)

// Ray's list is served from the store: it reads no run folder, yet every job has its
// entrypoint's exit code and error type.
func TestRayListFromStore(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": "exit 3", "metadata": map[string]string{"team": "a"}})
	e.rayWait(id, "FAILED")
	j, err := e.svc.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(j.RunDir, rundir.RecordFile)); err != nil {
		t.Fatal(err)
	}
	r := e.request("GET", "/api/jobs/", nil)
	wantStatus(t, r, http.StatusOK)
	list := decode[[]map[string]any](t, r)
	if len(list) != 1 {
		t.Fatalf("list %s, want one job", r.body)
	}
	got := map[string]any{"driver_exit_code": list[0]["driver_exit_code"], "error_type": list[0]["error_type"],
		"entrypoint": list[0]["entrypoint"], "metadata": list[0]["metadata"]}
	want := map[string]any{"driver_exit_code": 3.0, "error_type": rayErrorEntrypoint, "entrypoint": "exit 3",
		"metadata": map[string]any{"team": "a"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the job in GET /api/jobs/ without its run.json (-want +got):\n%s", diff)
	}
}
