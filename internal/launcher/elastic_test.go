package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An elastic gang (3 workers, at least 2) whose worker 2 fails every attempt: the first
// failure uses the one restart, the second drops worker 2 (no restart used), and the gang
// of 2 succeeds; its ranks see the new world size and the previous one.
func TestElasticGangDropsAFailingWorker(t *testing.T) {
	job := makeJob(t, `echo "$WORLD_SIZE ${TRAINYARD_PREVIOUS_WORLD_SIZE:-none} $TRAINYARD_MIN_WORKERS:$TRAINYARD_MAX_WORKERS" > "seen-$TRAINYARD_ATTEMPT-$RANK"
if [ "$RANK" = 2 ]; then
  # fail once the others have written theirs (a loaded machine may start them later)
  while [ ! -e "seen-$TRAINYARD_ATTEMPT-0" ] || [ ! -e "seen-$TRAINYARD_ATTEMPT-1" ]; do sleep 0.05; done
  exit 1
fi; sleep 0.5`).workers(3).restarts(1).obj(t)
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

// A resize asked while an elastic gang runs (the job server's grow): ranks that do not
// report through the helper have no checkpoint the launcher knows of, so the gang stops
// at once and the next attempt runs with the new workers, using no restart (the job has
// none); its ranks see the new world size and the previous one.
func TestElasticGangResizedOnRequest(t *testing.T) {
	job := makeJob(t, `echo "$WORLD_SIZE ${TRAINYARD_PREVIOUS_WORLD_SIZE:-none} $TRAINYARD_MIN_WORKERS:$TRAINYARD_MAX_WORKERS" > "seen-$TRAINYARD_ATTEMPT-$RANK"
if [ "$TRAINYARD_ATTEMPT" = 1 ]; then sleep 30; fi`).workers(2).obj(t)
	min := int32(1)
	job.Spec.MinWorkers = &min
	h := newHarness(t, job)
	h.l.MaxWorkers = 3
	resize := make(chan Resize, 1)
	h.l.Resize = resize
	dir := job.Spec.WorkingDir
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			_, err0 := os.Stat(filepath.Join(dir, "seen-1-0"))
			_, err1 := os.Stat(filepath.Join(dir, "seen-1-1"))
			if err0 == nil && err1 == nil { // both ranks of attempt 1 wrote what they saw
				break
			}
		}
		resize <- Resize{Slots: []Slot{{Worker: 0}, {Worker: 1}, {Worker: 2}}, Reason: "1 CPU free for 1 more worker"}
	}()
	res, _ := h.run(t, context.Background())
	if res.Outcome != Succeeded || res.Attempts != 2 || res.Reason != "all 3 ranks exited 0 in attempt 2" {
		t.Fatalf("got %+v, want all 3 ranks to succeed in attempt 2\n%s", res, h.out)
	}
	for file, want := range map[string]string{"seen-1-0": "2 none 1:3", "seen-2-0": "3 2 1:3", "seen-2-2": "3 2 1:3"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || strings.TrimSpace(string(data)) != want {
			t.Errorf("%s: %q %v, want %q", file, data, err, want)
		}
	}
	want := "attempt 1 stopped to resize: grew from 2 to 3 workers: 1 CPU free for 1 more worker; the gang goes on from its latest checkpoint (no restart used)"
	if !strings.Contains(h.out.String(), want) {
		t.Errorf("console lacks %q:\n%s", want, h.out)
	}
	if rec := h.l.Folder.Record(); len(rec.Attempts) != 2 || rec.Attempts[0].Workers != 2 || rec.Attempts[1].Workers != 3 {
		t.Errorf("run.json attempts %+v, want 2 then 3 workers", rec.Attempts)
	}
}
