package jobs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/store"
)

// A server that dies after recording an elastic job's grow and before asking its
// supervisor: the job holds the new room in the store (nothing else may take it) and runs
// on at its old size; the next server asks, and the supervisor restarts the gang at the
// new size, using no restart.
func TestCrashAfterResizeRecordAsksOnRestart(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), setup: crashAt(FaultAfterResizeRecord)}
	e.open()
	t.Cleanup(e.close)
	release := filepath.Join(e.dir, "release")
	blocker := e.submit("while [ ! -e "+release+" ]; do sleep 0.05; done", "1")
	e.stopOnCleanup(blocker.ID)
	e.waitFor(blocker.ID, store.Running)
	// attempt 1 waits to be resized; attempt 2 (2 workers) writes its world size and ends
	// after a while, so that the server sees it run.
	job := e.job(`if [ "$TRAINYARD_ATTEMPT" = 1 ]; then exec sleep 300; fi; echo "$WORLD_SIZE $TRAINYARD_PREVIOUS_WORLD_SIZE" > seen-$RANK; sleep 1`, "1")
	two, one := int32(2), int32(1)
	job.Spec.Workers, job.Spec.MinWorkers = &two, &one
	el, err := e.svc.Submit(Submission{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	e.stopOnCleanup(el.ID)
	if started := e.waitFor(el.ID, store.Running); len(started.GPUs) != 1 {
		t.Fatalf("elastic job started with %d workers, want the 1 that fits", len(started.GPUs))
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.crashed()
	marked, err := e.store.Get(el.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := marked.Resize; r == nil || r.Told || r.From != 1 || r.To != 2 || len(marked.GPUs) != 2 || !e.svc.supervising(marked) {
		log, _ := os.ReadFile(LogPath(marked))
		t.Fatalf("after the crash: resize %+v, GPUs %v, supervisor alive %v; want 1 to 2 recorded, not told, the new room held\n%s",
			marked.Resize, marked.GPUs, e.svc.supervising(marked), log)
	}
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(LogPath(marked))
			req, _ := os.ReadFile(e.svc.resizePath(el.ID))
			t.Logf("console:\n%s\nrequest: %s", log, req)
		}
	})
	e.restart()
	done := e.waitFor(el.ID, store.Succeeded, store.Failed)
	if done.Status != store.Succeeded || done.Restarts != 0 || done.Resizes != 1 || done.Resize != nil {
		t.Errorf("elastic job %s (%s): %d restart(s), %d resize(s), resize %+v; want SUCCEEDED, 0, 1, none",
			done.Status, done.Message, done.Restarts, done.Resizes, done.Resize)
	}
	if got := lines(t, filepath.Join(e.dir, "seen-1")); strings.Join(got, "") != "2 1" {
		t.Errorf("rank 1 saw %q, want world 2 after 1", got)
	}
}
