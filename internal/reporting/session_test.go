package reporting

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/tfevents"
)

// newRunDir returns a run folder <tmp>/runs/test and a job whose run it is.
func newRunDir(t *testing.T) (string, *v1.TrainJob) {
	t.Helper()
	storage := filepath.Join(t.TempDir(), "runs")
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3", "train.py"},
		StoragePath: storage, RunName: "test"}}
	dir := filepath.Join(storage, job.Spec.RunName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, job
}

// startSession starts a Session on dir, with a Notifier that records the notices. The
// Session is closed when the test ends (again, if the test closed it: that is harmless).
func startSession(t *testing.T, job *v1.TrainJob, dir string) (*Session, *notes) {
	t.Helper()
	n := &notes{}
	s, err := Start(job, rootOf(t, dir), n, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, n
}

// closeSession closes s, failing the test on an error.
func closeSession(t *testing.T, s *Session) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// attemptEnv calls AttemptEnv, failing the test on an error.
func attemptEnv(t *testing.T, s *Session, attempt int) map[string]string {
	t.Helper()
	env, err := s.AttemptEnv(attempt)
	if err != nil {
		t.Fatalf("AttemptEnv(%d): %v", attempt, err)
	}
	return env
}

// newCheckpointDir makes a checkpoint folder as the helper's new_checkpoint_dir() does,
// under <run>/.scratch/rank-0, holding state.txt with the given content.
func newCheckpointDir(t *testing.T, dir, name, content string) string {
	t.Helper()
	src := filepath.Join(dir, ScratchDir, "rank-0", name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "state.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// mustReport calls Report, failing the test on an error.
func mustReport(t *testing.T, s *Session, rep Report) Reply {
	t.Helper()
	reply, err := s.Report(rep)
	if err != nil {
		t.Fatalf("Report(%+v): %v", rep, err)
	}
	return reply
}

// iterations returns "<iteration> attempt <attempt> [<checkpoint>]" for each result.
func iterations(rows []Result) []string {
	var out []string
	for _, r := range rows {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%d attempt %d %s", r.Iteration, r.Attempt, r.Checkpoint)))
	}
	return out
}

// TestSessionRankZeroCheckpoint reports over the socket, as the helper does: rank 0's
// checkpoint is committed as checkpoint_000001 and its metrics are recorded.
func TestSessionRankZeroCheckpoint(t *testing.T) {
	dir, job := newRunDir(t)
	s, n := startSession(t, job, dir)
	env := attemptEnv(t, s, 1)
	src := newCheckpointDir(t, dir, "checkpoint-a", "model v1")
	c := dial(t, env["TRAINYARD_REPORT_SOCKET"])
	for _, tc := range []struct{ line, want string }{
		{line: `{"op": "report", "rank": 0, "metrics": {"loss": 0.5, "step": 10}, "checkpoint": "` + src + `"}`,
			want: `{"checkpoint":"checkpoint_000001","iteration":1,"ok":true}`},
		{line: `{"op": "report", "rank": 1, "metrics": {"loss": 0.75, "step": 10}, "checkpoint": null}`,
			want: `{"checkpoint":null,"iteration":1,"ok":true}`},
	} {
		got, err := c.roundTrip(tc.line)
		if err != nil || got != tc.want {
			t.Fatalf("reply to %s: %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	closeSession(t, s)

	m, err := checkpoint.Verify(filepath.Join(dir, "checkpoint_000001"))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	wantMeta := checkpoint.Meta{Iteration: 1, Attempt: 1, Rank: 0, Metrics: checkpoint.Metrics{"loss": 0.5, "step": 10}, Reporters: []int{0}}
	if diff := cmp.Diff(wantMeta, m.Meta, cmpopts.IgnoreFields(checkpoint.Meta{}, "Time")); diff != "" {
		t.Errorf("manifest meta (-want +got):\n%s", diff)
	}
	if got := readFile(t, filepath.Join(dir, "checkpoint_000001"), "state.txt"); got != "model v1" {
		t.Errorf("committed state.txt = %q", got)
	}
	if entries, err := os.ReadDir(src); err != nil || len(entries) != 0 {
		t.Errorf("the handed-over folder afterwards: %v, %v; want it empty", entries, err)
	}
	rows := readResults(t, dir)
	if diff := cmp.Diff([]string{"1 attempt 1 checkpoint_000001"}, iterations(rows)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"loss": 0.5, "step": 10}, rows[0].Metrics); diff != "" {
		t.Errorf("result metrics: rank 0's (-want +got):\n%s", diff)
	}
	checkScalars(t, dir, []tfevents.Scalar{{Step: 1, Tag: "loss", Value: 0.5}, {Step: 1, Tag: "step", Value: 10}})
	if got := n.take(); len(got) != 0 {
		t.Errorf("notices: %q", got)
	}
}

// checkScalars compares the scalars of the run's events files with want, ignoring times
// and order.
func checkScalars(t *testing.T, dir string, want []tfevents.Scalar) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, tfevents.FilePrefix+"*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("events files: %v, %v", files, err)
	}
	var got []tfevents.Scalar
	for _, f := range files {
		s, err := tfevents.ReadScalars(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s...)
	}
	less := func(a, b tfevents.Scalar) bool { return a.Step < b.Step || a.Step == b.Step && a.Tag < b.Tag }
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(tfevents.Scalar{}, "WallTime"), cmpopts.SortSlices(less)); diff != "" {
		t.Errorf("TensorBoard scalars (-want +got):\n%s", diff)
	}
}

// TestSessionRefusedCheckpoints checks the checkpoints a report is refused for at once:
// nothing is committed or recorded, and the iteration is not used up.
func TestSessionRefusedCheckpoints(t *testing.T) {
	cases := map[string]struct {
		rank    int
		prepare func(t *testing.T, src string)
		wantErr string // a regular expression; SRC stands for the folder
	}{
		"rank not of the gang": {rank: 5, wantErr: `^rank 5 is not a rank of this gang \(ranks 0\): its checkpoint is not kept$`},
		"symbolic link inside": {rank: 0,
			prepare: func(t *testing.T, src string) {
				if err := os.Symlink("state.txt", filepath.Join(src, "link")); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: `^checkpoint SRC: link is a symbolic link; a checkpoint may hold only regular files and folders$`},
		"missing": {rank: 0,
			prepare: func(t *testing.T, src string) {
				if err := os.RemoveAll(src); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: `^checkpoint SRC does not exist$`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir, job := newRunDir(t)
			s, _ := startSession(t, job, dir)
			attemptEnv(t, s, 1)
			src := newCheckpointDir(t, dir, "checkpoint-a", "model")
			if tc.prepare != nil {
				tc.prepare(t, src)
			}
			_, err := s.Report(Report{Rank: tc.rank, Metrics: map[string]float64{"loss": 1}, Checkpoint: src})
			re := strings.ReplaceAll(tc.wantErr, "SRC", regexp.QuoteMeta(src))
			if err == nil || !regexp.MustCompile(re).MatchString(err.Error()) {
				t.Fatalf("Report error = %v, want one matching %s", err, re)
			}
			if got := mustReport(t, s, Report{Rank: 0}); got.Iteration != 1 {
				t.Errorf("next rank-0 report: iteration %d, want 1", got.Iteration)
			}
			closeSession(t, s)
			if _, err := os.Stat(filepath.Join(dir, "checkpoint_000001")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("checkpoint_000001: %v; want none", err)
			}
			if diff := cmp.Diff([]string{"1 attempt 1"}, iterations(readResults(t, dir))); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionContinues checks that iterations, checkpoint numbers and the total time go
// on when the run continues in a new Session on the same folder, and that every rank is
// told the same iteration for the same step.
func TestSessionContinues(t *testing.T) {
	dir, job := newRunDir(t)
	s, _ := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": 2}})
	mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": 1},
		Checkpoint: newCheckpointDir(t, dir, "a", "state 2")})
	time.Sleep(10 * time.Millisecond) // so that the total time visibly grows
	closeSession(t, s)

	s, n := startSession(t, job, dir)
	env := attemptEnv(t, s, 2)
	if got, want := env["TRAINYARD_CHECKPOINT"], filepath.Join(dir, "checkpoint_000001"); got != want {
		t.Errorf("TRAINYARD_CHECKPOINT = %q, want %q", got, want)
	}
	var got []Reply
	for i, rank := range []int{0, 1, 0, 1} {
		rep := Report{Rank: rank, Metrics: map[string]float64{"loss": 0.5}}
		if rank == 0 && i == 2 {
			rep.Checkpoint = newCheckpointDir(t, dir, "b", "state 4")
		}
		got = append(got, mustReport(t, s, rep))
	}
	want := []Reply{{Iteration: 3}, {Iteration: 3}, {Iteration: 4, Checkpoint: "checkpoint_000002"}, {Iteration: 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies in the continued run (-want +got):\n%s", diff)
	}
	closeSession(t, s)
	rows := readResults(t, dir)
	wantRows := []string{"1 attempt 1", "2 attempt 1 checkpoint_000001", "3 attempt 2", "4 attempt 2 checkpoint_000002"}
	if diff := cmp.Diff(wantRows, iterations(rows)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].TimeTotalS < rows[i-1].TimeTotalS {
			t.Errorf("time_total_s falls from %v to %v at iteration %d", rows[i-1].TimeTotalS, rows[i].TimeTotalS, rows[i].Iteration)
		}
	}
	wantNotes := []string{"attempt 2: resuming from checkpoint_000001 (iteration 2, saved in attempt 1)"}
	if diff := cmp.Diff(wantNotes, n.take()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

// TestSessionAttemptEnv checks what each attempt's workers get: the socket, the
// process-group timeout, and the latest checkpoint that verifies, with notices.
func TestSessionAttemptEnv(t *testing.T) {
	dir, job := newRunDir(t)
	timeout := int64(42)
	job.Spec.ProcessGroupTimeoutSeconds = &timeout
	s, n := startSession(t, job, dir)
	env := attemptEnv(t, s, 1)
	base := map[string]string{"TRAINYARD_REPORT_SOCKET": s.server.Path, "TRAINYARD_PG_TIMEOUT_SECONDS": "42",
		"TRAINYARD_PREEMPTION_FILE": filepath.Join(filepath.Dir(s.server.Path), "preemption.json")}
	if diff := cmp.Diff(base, env); diff != "" {
		t.Errorf("first attempt's env (-want +got):\n%s", diff)
	}
	for i, content := range []string{"one", "two"} {
		mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": float64(i)},
			Checkpoint: newCheckpointDir(t, dir, content, content)})
	}
	leftover := newCheckpointDir(t, dir, "never-handed-over", "x")

	env = attemptEnv(t, s, 2) // waits for the commit in flight
	want := map[string]string{"TRAINYARD_CHECKPOINT": filepath.Join(dir, "checkpoint_000002")}
	if diff := cmp.Diff(with(base, want), env); diff != "" {
		t.Errorf("second attempt's env (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a scratch folder of the first attempt: %v; want it removed", err)
	}

	corrupt(t, filepath.Join(dir, "checkpoint_000002", "state.txt"))
	env = attemptEnv(t, s, 3)
	want = map[string]string{"TRAINYARD_CHECKPOINT": filepath.Join(dir, "checkpoint_000001")}
	if diff := cmp.Diff(with(base, want), env); diff != "" {
		t.Errorf("third attempt's env (-want +got):\n%s", diff)
	}
	wantNotes := []string{
		"attempt 2: resuming from checkpoint_000002 (iteration 2, saved in attempt 1)",
		"warning: skipping a checkpoint that does not verify: checkpoint_000002: state.txt: size 9 bytes, manifest says 3",
		"attempt 3: resuming from checkpoint_000001 (iteration 1, saved in attempt 1)",
	}
	if diff := cmp.Diff(wantNotes, n.take()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

// with returns a copy of a with the entries of b added.
func with(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{a, b} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// corrupt changes a committed (read-only) file, as a user editing it would.
func corrupt(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("corrupted"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSessionCommitFailsInBackground makes a commit fail after Report handed it over
// (the run folder's .staging is replaced by a file): the error reaches the next rank-0
// report, and what was committed before is kept and resumed from.
func TestSessionCommitFailsInBackground(t *testing.T) {
	dir, job := newRunDir(t)
	s, n := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": 1}, Checkpoint: newCheckpointDir(t, dir, "a", "one")})
	if err := s.committer.Wait(); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	staging := filepath.Join(dir, checkpoint.StagingDir)
	if err := os.RemoveAll(staging); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staging, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := newCheckpointDir(t, dir, "b", "two")
	reply := mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": 0.5}, Checkpoint: src})
	if want := (Reply{Iteration: 2, Checkpoint: "checkpoint_000002"}); reply != want {
		t.Fatalf("report handing over the second checkpoint: %+v, want %+v", reply, want)
	}

	err := nextError(t, s)
	wantErr := `^an earlier checkpoint could not be committed: commit checkpoint_000002: stage: .*not a folder; move it away ` +
		`\(the checkpoint's files are kept in (` + regexp.QuoteMeta(filepath.Dir(src)) + `/\.b\.trainyard-[^/]+)\)$`
	m := regexp.MustCompile(wantErr).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error = %v, want one matching %s", err, wantErr)
	}
	if got := readFile(t, m[1], "state.txt"); got != "two" {
		t.Errorf("the failed checkpoint's state.txt = %q, want %q", got, "two")
	}
	if got := mustReport(t, s, Report{Rank: 0}); got.Checkpoint != "" {
		t.Errorf("report after the error: %+v", got)
	}

	if err := os.Remove(staging); err != nil {
		t.Fatal(err)
	}
	env := attemptEnv(t, s, 2)
	if got, want := env["TRAINYARD_CHECKPOINT"], filepath.Join(dir, "checkpoint_000001"); got != want {
		t.Errorf("TRAINYARD_CHECKPOINT = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"attempt 2: resuming from checkpoint_000001 (iteration 1, saved in attempt 1)"}, n.take()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if got := iterations(readResults(t, dir)); len(got) < 3 || got[0] != "1 attempt 1 checkpoint_000001" {
		t.Errorf("results: %q", got)
	}
}

// nextError sends rank-0 reports without a checkpoint until one fails, as the commit
// fails in the background, and returns its error.
func nextError(t *testing.T, s *Session) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.Report(Report{Rank: 0, Metrics: map[string]float64{"loss": 0.25}}); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no report failed within 10s of the failing commit")
	return nil
}

// TestSessionCloseCommitFails checks that a commit that fails after the last report is
// Close's error.
func TestSessionCloseCommitFails(t *testing.T) {
	dir, job := newRunDir(t)
	s, _ := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	src := newCheckpointDir(t, dir, "a", "one")
	staging := filepath.Join(dir, checkpoint.StagingDir)
	if err := os.Remove(staging); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staging, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": 1}, Checkpoint: src})
	err := s.Close()
	if !errors.Is(err, ErrCommit) || !strings.Contains(err.Error(), "commit checkpoint_000001: stage:") {
		t.Errorf("Close = %v, want an error wrapping ErrCommit about checkpoint_000001", err)
	}
}

// A folder a failed commit kept for the user survives the cleaning of the scratch folder
// at the next attempt; a folder never handed over does not.
func TestSessionKeepsFoldersOfFailedCommits(t *testing.T) {
	dir, job := newRunDir(t)
	s, _ := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	kept := newCheckpointDir(t, dir, ".checkpoint-1.trainyard-abc123", "kept")
	stale := newCheckpointDir(t, dir, "checkpoint-2", "stale")
	attemptEnv(t, s, 2)
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the folder a failed commit kept was removed: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a folder never handed over: %v; want it removed", err)
	}
}

// The session's preemption notice hears of reports, and of the first checkpoint committed
// from a report made after it was posted.
func TestSessionPreemptionNotice(t *testing.T) {
	dir, job := newRunDir(t)
	s, _ := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	n := s.Notice()
	if n.Listening() {
		t.Fatal("listening before any report")
	}
	if reply, err := s.Report(Report{Rank: 1, Listen: true}); err != nil || reply.Iteration != 0 {
		t.Fatalf("listen: %+v %v", reply, err)
	}
	if !n.Listening() {
		t.Fatal("not listening after a rank said it listens")
	}
	mustReport(t, s, Report{Rank: 0, Checkpoint: newCheckpointDir(t, dir, "before", "x")})
	if err := s.committer.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := n.Post(time.Now().Add(time.Minute), "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-n.Saved():
		t.Fatalf("%s, committed before the notice, counted as saved", name)
	case <-time.After(100 * time.Millisecond):
	}
	mustReport(t, s, Report{Rank: 0, Checkpoint: newCheckpointDir(t, dir, "after", "y")})
	select {
	case name := <-n.Saved():
		if name != "checkpoint_000002" {
			t.Errorf("saved %s, want checkpoint_000002", name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint reported after the notice was not seen committed")
	}
}
