package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/preempt"
)

// growScript is an elastic gang's rank that reports through the helper (the test says
// n.Heard) but never saves a checkpoint: in attempt 1 it writes what it saw and trains
// until stopped, copying the preemption notice when one comes; in attempt 2 it exits 0.
const growScript = `echo "$WORLD_SIZE" > "seen-$TRAINYARD_ATTEMPT-$RANK"
if [ "$TRAINYARD_ATTEMPT" = 1 ]; then
  while [ ! -e "$TRAINYARD_PREEMPTION_FILE" ]; do sleep 0.05; done
  cat "$TRAINYARD_PREEMPTION_FILE" > "saw-$RANK"; exec sleep 300
fi`

// growHarness is an elastic gang of 2 workers (1 to 3) that listens for notices, with the
// resize interval given (nil: the default) and grace seconds to stop. grow asks it to grow
// to 3 workers once both ranks of attempt 1 run.
func growHarness(t *testing.T, interval *int64, grace int64) (h *harness, n *preempt.Notice, grow func()) {
	t.Helper()
	job := makeJob(t, growScript).workers(2).grace(grace).obj(t)
	min := int32(1)
	job.Spec.MinWorkers, job.Spec.ResizeIntervalSeconds = &min, interval
	h = newHarness(t, job)
	h.l.MaxWorkers = 3
	n = preempt.New(t.TempDir())
	n.Heard()
	resize := make(chan Resize, 1)
	h.l.Notice, h.l.Resize = n, resize
	h.l.ExtraEnv = map[string]string{preempt.EnvFile: n.Path()}
	dir := job.Spec.WorkingDir
	return h, n, func() {
		waitFor(t, filepath.Join(dir, "seen-1-0"), filepath.Join(dir, "seen-1-1"))
		resize <- Resize{Slots: []Slot{{Worker: 0}, {Worker: 1}, {Worker: 2}}, Reason: "GPUs 2 free"}
	}
}

// checkGrew checks that the run went on in a second attempt of 3 workers, using no
// restart (the job has none).
func checkGrew(t *testing.T, h *harness, res Result) {
	t.Helper()
	if res.Outcome != Succeeded || res.Attempts != 2 || res.Reason != "all 3 ranks exited 0 in attempt 2" {
		t.Fatalf("got %+v, want all 3 ranks to succeed in attempt 2\n%s", res, h.out)
	}
	if rec := h.l.Folder.Record(); len(rec.Attempts) != 2 || rec.Attempts[0].Workers != 2 || rec.Attempts[1].Workers != 3 {
		t.Errorf("run.json attempts %+v, want 2 then 3 workers", rec.Attempts)
	}
}

// A grow asked of ranks that listen for notices but commit no checkpoint waits for one no
// longer than the resize interval: then the ranks get the preemption notice to save one
// now, and without it the gang resizes from its latest checkpoint, redoing the steps since
// (at once when the grace period leaves no time to save). An interval of 0 resizes at
// once, with the notice.
func TestElasticGrowAtTheResizeInterval(t *testing.T) {
	one, zero := int64(1), int64(0)
	cases := map[string]struct {
		interval *int64
		grace    int64
		notice   string // what the ranks' preemption notice says; "" for none
		want     []string
		minTook  time.Duration // from the request to the end of the run
	}{
		"the ranks get the notice after the interval": {
			interval: &one, grace: 2,
			notice: "resizing to 3 workers: GPUs 2 free; no checkpoint committed within 1s",
			want: []string{
				"asked to grow to 3 workers (GPUs 2 free): the gang resizes at its next committed checkpoint, or in 1s without one (resize interval)",
				"resizing to 3 workers: GPUs 2 free; no checkpoint committed within 1s: the ranks have until",
				"no checkpoint committed by the notice's deadline; stopping the gang (SIGTERM, SIGKILL after 1s); it resumes from checkpoint_000004 (the steps since are redone)",
				"attempt 1 stopped to resize: grew from 2 to 3 workers: GPUs 2 free; the gang goes on from its latest checkpoint (no restart used)",
			},
			minTook: 2 * time.Second, // the interval, then the notice's deadline (1 s of the 2 s grace period)
		},
		"no time to save: at once after the interval": {
			interval: &one, grace: 1,
			want: []string{
				"asked to grow to 3 workers (GPUs 2 free): no checkpoint committed within 1s; resizing now, from checkpoint_000004 (the steps since are redone)",
				"stopping the gang to resize it (SIGTERM, SIGKILL after 1s)",
				"attempt 1 stopped to resize: grew from 2 to 3 workers",
			},
			minTook: time.Second,
		},
		"interval 0: at once, with the notice": {
			interval: &zero, grace: 2,
			notice: "resizing to 3 workers: GPUs 2 free",
			want: []string{
				"asked to grow to 3 workers (GPUs 2 free): the resize interval is 0, so the gang resizes now",
				"resizing to 3 workers: GPUs 2 free: the ranks have until",
				"attempt 1 stopped to resize: grew from 2 to 3 workers",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, n, grow := growHarness(t, tc.interval, tc.grace)
			n.Committed("checkpoint_000004", time.Now()) // before the request: no reason to grow
			asked := make(chan time.Time, 1)
			go func() { grow(); asked <- time.Now() }()
			res, _ := h.run(t, context.Background())
			took := time.Since(<-asked)
			checkGrew(t, h, res)
			out := h.out.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("console lacks %q:\n%s", w, out)
				}
			}
			if took < tc.minTook {
				t.Errorf("the gang grew %s after the request, before %s", took, tc.minTook)
			}
			if took > tc.minTook+20*time.Second {
				t.Errorf("the gang grew %s after the request", took)
			}
			saw, err := os.ReadFile(filepath.Join(h.l.Job.Spec.WorkingDir, "saw-0"))
			switch c := string(saw); {
			case tc.notice == "" && err == nil:
				t.Errorf("the ranks got a notice: %s", c)
			case tc.notice != "" && !strings.Contains(c, `"reason":"`+tc.notice+`"`):
				t.Errorf("the ranks' notice: %q %v, want the reason %q", c, err, tc.notice)
			}
		})
	}
}

// A checkpoint committed after the request and before the resize interval ends is where
// the gang grows, without the preemption notice.
func TestElasticGrowAtACheckpointBeforeTheInterval(t *testing.T) {
	h, n, grow := growHarness(t, nil, 20) // the default interval, 10m
	go func() {
		grow()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(h.out.String(), "or in 10m without one") { // the request is in
				break
			}
		}
		time.Sleep(300 * time.Millisecond) // the gang must not be stopped meanwhile
		n.Committed("checkpoint_000005", time.Now())
	}()
	res, took := h.run(t, context.Background())
	checkGrew(t, h, res)
	out := h.out.String()
	want := "checkpoint_000005 committed: stopping the gang to resize it (SIGTERM, SIGKILL after 20s)"
	if !strings.Contains(out, want) {
		t.Errorf("console lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "the ranks have until") {
		t.Errorf("the ranks got the preemption notice:\n%s", out)
	}
	if took > 30*time.Second {
		t.Errorf("the run took %s", took)
	}
}
