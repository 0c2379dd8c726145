package reporting

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/checkpoint"
)

// shardDir makes rank's checkpoint folder under <run>/.scratch/rank-<rank>, holding files.
func shardDir(t *testing.T, dir string, rank int, name string, files map[string]string) string {
	t.Helper()
	src := filepath.Join(dir, ScratchDir, "rank-"+strconv.Itoa(rank), name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for rel, content := range files {
		if err := os.WriteFile(filepath.Join(src, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// committedFiles returns the files of the committed checkpoint name, without its manifest,
// after checking that it verifies.
func committedFiles(t *testing.T, dir, name string) (map[string]string, checkpoint.Meta) {
	t.Helper()
	m, err := checkpoint.Verify(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("Verify %s: %v", name, err)
	}
	out := map[string]string{}
	for _, f := range m.Files {
		out[f.Path] = readFile(t, filepath.Join(dir, name), f.Path)
	}
	return out, m.Meta
}

// Every rank's checkpoint folder of a step goes into one checkpoint, committed once every
// rank has made that report (Ray Train 2.7+); a step some rank never reported is dropped
// when the attempt ends, and one that ranks never reporting at all hold up is committed.
func TestSessionMergesRanksCheckpoints(t *testing.T) {
	dir, job := newRunDir(t)
	two := int32(2)
	job.Spec.Workers = &two
	s, n := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	loss := func(v float64) map[string]float64 { return map[string]float64{"loss": v} }

	// Step 1: both ranks save a shard, and both a model.pt of their own.
	r1 := mustReport(t, s, Report{Rank: 1, Metrics: loss(9), Checkpoint: shardDir(t, dir, 1, "a", map[string]string{"shard-1.pt": "one", "model.pt": "rank 1's"})})
	if err := s.committer.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint_000001")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint_000001 before rank 0 reported: %v; want none yet", err)
	}
	r0 := mustReport(t, s, Report{Rank: 0, Metrics: loss(1), Checkpoint: shardDir(t, dir, 0, "a", map[string]string{"shard-0.pt": "zero", "model.pt": "rank 0's"})})
	want := Reply{Iteration: 1, Checkpoint: "checkpoint_000001"}
	if r0 != want || r1 != want {
		t.Errorf("replies: rank 0 %+v, rank 1 %+v; want both %+v", r0, r1, want)
	}
	// Step 2: only rank 0 saves. Step 3: only rank 1 does, after rank 0 reported.
	mustReport(t, s, Report{Rank: 0, Metrics: loss(0.5), Checkpoint: shardDir(t, dir, 0, "b", map[string]string{"model.pt": "two"})})
	mustReport(t, s, Report{Rank: 1, Metrics: loss(9)})
	mustReport(t, s, Report{Rank: 0, Metrics: loss(0.25)})
	if got := mustReport(t, s, Report{Rank: 1, Metrics: loss(9), Checkpoint: shardDir(t, dir, 1, "c", map[string]string{"shard-1.pt": "three"})}); got != (Reply{Iteration: 3, Checkpoint: "checkpoint_000003"}) {
		t.Errorf("rank 1's reply at step 3: %+v", got)
	}
	// Step 4: rank 0 saves, and rank 1 never reports it (it failed).
	mustReport(t, s, Report{Rank: 0, Metrics: loss(0.125), Checkpoint: shardDir(t, dir, 0, "d", map[string]string{"model.pt": "four"})})

	env := attemptEnv(t, s, 2)
	if got, want := env["TRAINYARD_CHECKPOINT"], filepath.Join(dir, "checkpoint_000003"); got != want {
		t.Errorf("TRAINYARD_CHECKPOINT = %q, want %q", got, want)
	}
	for name, want := range map[string]map[string]string{
		"checkpoint_000001": {"shard-0.pt": "zero", "shard-1.pt": "one", "model.pt": "rank 0's"},
		"checkpoint_000002": {"model.pt": "two"},
		"checkpoint_000003": {"shard-1.pt": "three"},
	} {
		files, meta := committedFiles(t, dir, name)
		if d := cmp.Diff(want, files); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
		if name == "checkpoint_000003" && (meta.Iteration != 3 || meta.Metrics["loss"] != 0.25) {
			t.Errorf("%s meta: %+v, want iteration 3 with rank 0's metrics", name, meta)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint_000004")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint_000004 (step 4, which rank 1 never reported): %v; want none", err)
	}
	wantNotes := []string{
		"checkpoint_000001: several ranks wrote model.pt (1 file(s) in all); the lowest rank's copy is kept, " +
			"as for DDP replicas that each save the same model (name each rank's shard apart to keep them all)",
		"warning: the checkpoint of iteration 4 (checkpoint_000004) is not kept: rank(s) 1 never made that report, so their part of it is missing",
		"attempt 2: resuming from checkpoint_000003 (iteration 3, saved in attempt 1)",
	}
	if d := cmp.Diff(wantNotes, n.take()); d != "" {
		t.Errorf("notices (-want +got):\n%s", d)
	}

	// Attempt 2: rank 1, which reported in attempt 1, fails before its first report of
	// this attempt: rank 0's part alone is not a checkpoint.
	mustReport(t, s, Report{Rank: 0, Metrics: loss(0.1), Checkpoint: shardDir(t, dir, 0, "e", map[string]string{"model.pt": "five"})})
	closeSession(t, s)
	if _, err := os.Stat(filepath.Join(dir, "checkpoint_000005")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint_000005 (rank 1 failed before its report of the resumed attempt): %v; want none", err)
	}
	if got := n.take(); len(got) != 1 || got[0] != "warning: the checkpoint of iteration 5 (checkpoint_000005) is not kept: "+
		"rank(s) 1 never made that report, so their part of it is missing" {
		t.Errorf("notices at the end: %q", got)
	}
	for _, rank := range []string{"rank-0", "rank-1"} {
		entries, _ := os.ReadDir(filepath.Join(dir, ScratchDir, rank))
		for _, e := range entries {
			if sub, _ := os.ReadDir(filepath.Join(dir, ScratchDir, rank, e.Name())); len(sub) > 0 || e.Name()[0] == '.' {
				t.Errorf("left in %s: %s (%d entries)", rank, e.Name(), len(sub))
			}
		}
	}
}

// A run whose other ranks never report (only rank 0 does) has rank 0's checkpoints
// committed when the attempt's processes are gone, with a warning.
func TestSessionCommitsWhenOnlyRankZeroReports(t *testing.T) {
	dir, job := newRunDir(t)
	two := int32(2)
	job.Spec.Workers = &two
	s, n := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	mustReport(t, s, Report{Rank: 0, Metrics: map[string]float64{"loss": 1}, Checkpoint: shardDir(t, dir, 0, "a", map[string]string{"model.pt": "one"})})
	closeSession(t, s)
	files, meta := committedFiles(t, dir, "checkpoint_000001")
	if files["model.pt"] != "one" || !slices.Equal(meta.Reporters, []int{0}) {
		t.Errorf("checkpoint_000001: %v, reporters %v; want rank 0's model, reported by rank 0", files, meta.Reporters)
	}
	if got := n.take(); len(got) != 1 || !strings.HasPrefix(got[0], "warning: some ranks never called report()") {
		t.Errorf("notices at the end: %q", got)
	}
}

// A run continued by another process (trainyard run --resume, a server restarted) knows
// from the checkpoint it resumes from which ranks report: one of them that fails before
// its first report keeps rank 0's part from being committed alone.
func TestSessionKnowsReportersOfTheCheckpointItResumes(t *testing.T) {
	dir, job := newRunDir(t)
	two := int32(2)
	job.Spec.Workers = &two
	s, _ := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	for rank := range 2 {
		mustReport(t, s, Report{Rank: rank, Checkpoint: shardDir(t, dir, rank, "a", map[string]string{fmt.Sprintf("shard-%d.pt", rank): "one"})})
	}
	closeSession(t, s)
	if _, meta := committedFiles(t, dir, "checkpoint_000001"); !slices.Equal(meta.Reporters, []int{0, 1}) {
		t.Fatalf("checkpoint_000001's reporters: %v; want [0 1]", meta.Reporters)
	}

	s, n := startSession(t, job, dir) // the next process of the run
	if env := attemptEnv(t, s, 2); env["TRAINYARD_CHECKPOINT"] != filepath.Join(dir, "checkpoint_000001") {
		t.Fatalf("attempt 2 resumes from %q", env["TRAINYARD_CHECKPOINT"])
	}
	mustReport(t, s, Report{Rank: 0, Checkpoint: shardDir(t, dir, 0, "b", map[string]string{"shard-0.pt": "two"})})
	closeSession(t, s) // rank 1 died before its first report
	if _, err := os.Stat(filepath.Join(dir, "checkpoint_000002")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("checkpoint_000002, without rank 1's shard: %v; want none", err)
	}
	if got := n.take(); len(got) != 2 || !strings.Contains(got[1], "rank(s) 1 never made that report") {
		t.Errorf("notices: %q", got)
	}
}

// A rank that passes a checkpoint with a report after another rank's later report carried
// one is refused: the checkpoints would be numbered out of order.
func TestSessionRefusesCheckpointOutOfStep(t *testing.T) {
	dir, job := newRunDir(t)
	two := int32(2)
	job.Spec.Workers = &two
	s, _ := startSession(t, job, dir)
	attemptEnv(t, s, 1)
	mustReport(t, s, Report{Rank: 1})
	mustReport(t, s, Report{Rank: 1, Checkpoint: shardDir(t, dir, 1, "a", map[string]string{"x": "1"})})
	_, err := s.Report(Report{Rank: 0, Checkpoint: shardDir(t, dir, 0, "a", map[string]string{"y": "0"})})
	if err == nil || err.Error() != "rank 0 passed a checkpoint with its report 1 after another rank's report 2 carried one: "+
		"every rank reports at the same points, and those of a checkpoint carry their folders" {
		t.Errorf("error = %v", err)
	}
}
