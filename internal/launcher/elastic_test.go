package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An elastic gang (3 workers, at least 2) whose worker 2 fails every attempt: the first
// failure uses the one restart, the second drops worker 2 (no restart used), and the gang
// of 2 succeeds; its ranks see the new world size and the previous one.
func TestElasticGangDropsAFailingWorker(t *testing.T) {
	job := makeJob(t, `echo "$WORLD_SIZE ${TRAINYARD_PREVIOUS_WORLD_SIZE:-none} $TRAINYARD_MIN_WORKERS:$TRAINYARD_MAX_WORKERS" > "seen-$TRAINYARD_ATTEMPT-$RANK"
if [ "$RANK" = 2 ]; then exit 1; fi; sleep 0.5`).workers(3).restarts(1).obj(t)
	min := int32(2)
	job.Spec.MinWorkers = &min
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Succeeded || res.Attempts != 3 {
		t.Fatalf("got %+v, want success in attempt 3\n%s", res, h.out)
	}
	if res.Reason != "all 2 ranks exited 0 in attempt 3" {
		t.Errorf("reason %q", res.Reason)
	}
	dir := job.Spec.WorkingDir
	for file, want := range map[string]string{"seen-1-0": "3 none 2:3", "seen-2-2": "3 none 2:3", "seen-3-0": "2 3 2:3", "seen-3-1": "2 3 2:3"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || strings.TrimSpace(string(data)) != want {
			t.Errorf("%s: %q %v, want %q", file, data, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "seen-3-2")); !os.IsNotExist(err) {
		t.Errorf("attempt 3 started a rank 2: %v", err)
	}
	for _, want := range []string{"restarting the gang (restart 1 of 1)",
		"resized from 3 to 2 workers: worker 2 failed 2 attempts in a row; the gang goes on from its latest checkpoint (no restart used)"} {
		if !strings.Contains(h.out.String(), want) {
			t.Errorf("console lacks %q:\n%s", want, h.out)
		}
	}
}

// A gang that is not elastic, or already at its smallest, fails as before.
func TestGangAtItsSmallestFails(t *testing.T) {
	job := makeJob(t, `if [ "$RANK" = 1 ]; then exit 1; fi; sleep 0.5`).workers(2).restarts(1).obj(t)
	min := int32(2)
	job.Spec.MinWorkers = &min
	h := newHarness(t, job)
	if res, _ := h.run(t, context.Background()); res.Outcome != Failed || res.Attempts != 2 {
		t.Fatalf("got %+v, want failure after 2 attempts", res)
	}
}
