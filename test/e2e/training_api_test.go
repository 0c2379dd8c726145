package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/tfevents"
)

// reportJob runs testdata/report.py (stdlib only) with 2 workers.
func reportJob(t *testing.T, storage, name string, flags []string, scriptArgs ...string) (int, string) {
	t.Helper()
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "report.py")
	args := append([]string{"run", "--storage-path", storage, "--name", name, "--workers", "2"}, flags...)
	args = append(append(args, "--", python, script), scriptArgs...)
	return run(t, t.TempDir(), nil, args...)
}

// Metrics and checkpoints reach the run folder: progress.csv, result.json, TensorBoard
// events, checkpoints that verify, and the result table at the end.
func TestReportRecordsResults(t *testing.T) {
	storage := t.TempDir()
	code, out := reportJob(t, storage, "r", nil, "--iterations", "3")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	dir := filepath.Join(storage, "r")
	rows, err := reporting.ReadResults(dir)
	if err != nil || len(rows) != 3 {
		t.Fatalf("results: %d rows (%v), want 3\n%s", len(rows), err, out)
	}
	if rows[2].Checkpoint != "checkpoint_000003" || rows[2].Metrics["loss"] != 1.0/3 {
		t.Errorf("last result %+v", rows[2])
	}
	for _, name := range []string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000003"} {
		if _, err := checkpoint.Verify(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s does not verify: %v", name, err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, reporting.ProgressFile))
	if !strings.HasPrefix(string(csv), "training_iteration,timestamp,time_this_iter_s,time_total_s,attempt,checkpoint,iteration_seen,loss\n") {
		t.Errorf("progress.csv:\n%s", csv)
	}
	events, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if len(events) != 1 {
		t.Fatalf("events files: %v", events)
	}
	scalars, err := tfevents.ReadScalars(events[0])
	if err != nil || len(scalars) != 6 {
		t.Errorf("TensorBoard scalars: %d (%v), want 6 (2 metrics x 3 iterations)", len(scalars), err)
	}
	for _, want := range []string{"iter", "checkpoint_000003", "reported iteration 3 checkpoint checkpoint_000003"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, table := run(t, t.TempDir(), nil, "results", "--storage-path", storage, "r")
	if code != 0 || !strings.Contains(table, "checkpoint_000002") {
		t.Errorf("trainyard results: exit %d\n%s", code, table)
	}
	assertPrivate(t, dir)
}

// assertPrivate fails the test for anything in the run folder dir that its group or others
// may read, write or enter (the README: a run folder is 0700 and what Trainyard writes in
// it 0600, committed checkpoints' files read-only to their owner).
func assertPrivate(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err == nil && info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want nothing for group and others", p, info.Mode().Perm())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every rank's checkpoint folder of a report goes into one checkpoint (Ray Train 2.7+),
// and a resumed run hands each rank the checkpoint with its own shard.
func TestEveryRanksCheckpointFilesKept(t *testing.T) {
	storage := t.TempDir()
	code, out := reportJob(t, storage, "s", nil, "--iterations", "2", "--shards")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	dir := filepath.Join(storage, "s")
	for _, name := range []string{"checkpoint_000001", "checkpoint_000002"} {
		m, err := checkpoint.Verify(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s does not verify: %v", name, err)
		}
		var files []string
		for _, f := range m.Files {
			files = append(files, f.Path)
		}
		if got, want := strings.Join(files, " "), "shard-0.txt shard-1.txt state.txt"; got != want {
			t.Errorf("%s holds %q, want %q", name, got, want)
		}
	}
	if strings.Contains(out, "only rank 0's checkpoint is kept") || strings.Contains(out, "several ranks wrote") {
		t.Errorf("a warning about the ranks' files:\n%s", out)
	}
	code, out = reportJob(t, storage, "s", []string{"--resume"}, "--iterations", "3", "--shards")
	for _, want := range []string{"rank 0 read its shard: rank 0 iteration 2", "rank 1 read its shard: rank 1 iteration 2"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("resumed: exit %d, want %q:\n%s", code, want, out)
		}
	}
}

// Retention keeps the newest checkpoints, or the best by a metric; the latest stays.
func TestCheckpointRetention(t *testing.T) {
	cases := map[string]struct {
		flags []string
		want  []string
		warn  string
	}{
		"newest two": {flags: []string{"--keep-checkpoints", "2"}, want: []string{"checkpoint_000003", "checkpoint_000004"}},
		"best by min loss": {flags: []string{"--keep-checkpoints", "1", "--checkpoint-score", "loss", "--score-order", "min"},
			want: []string{"checkpoint_000004"}},
		"best by max loss, latest kept": {flags: []string{"--keep-checkpoints", "1", "--checkpoint-score", "loss", "--score-order", "max"},
			want: []string{"checkpoint_000001", "checkpoint_000004"}},
		"score never reported": {flags: []string{"--keep-checkpoints", "1", "--checkpoint-score", "acc"},
			want: []string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000003", "checkpoint_000004"},
			warn: `--checkpoint-score acc: the report of iteration 1 has no metric "acc" (it has: iteration_seen, loss)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			storage := t.TempDir()
			code, out := reportJob(t, storage, "k", tc.flags, "--iterations", "4")
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			got, _ := filepath.Glob(filepath.Join(storage, "k", "checkpoint_*"))
			for i := range got {
				got[i] = filepath.Base(got[i])
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("kept %v, want %v\n%s", got, tc.want, out)
			}
			if tc.warn != "" && !strings.Contains(out, tc.warn) {
				t.Errorf("output lacks the warning %q:\n%s", tc.warn, out)
			}
		})
	}
}

// Bad reports get a clear message in the worker's traceback and fail the job; what was
// committed stays.
func TestBadReports(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"string metric":      {args: []string{"--bad-metric"}, want: "report: metric 'loss' is str ('high'); metrics must be numbers"},
		"missing checkpoint": {args: []string{"--checkpoint-path", "/nonexistent/ckpt"}, want: "report: checkpoint /nonexistent/ckpt does not exist"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := reportJob(t, t.TempDir(), "bad", nil, tc.args...)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 1 with %q:\n%s", code, tc.want, out)
			}
		})
	}
}

// A checkpoint edited after its commit is skipped on resume, with a warning, and the one
// before it is used.
func TestEditedCheckpointSkipped(t *testing.T) {
	storage := t.TempDir()
	if code, out := reportJob(t, storage, "e", nil, "--iterations", "2"); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	file := filepath.Join(storage, "e", "checkpoint_000002", "state.txt")
	if err := os.WriteFile(file, []byte("2 edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := reportJob(t, storage, "e", []string{"--resume"}, "--iterations", "3")
	if code != 0 {
		t.Fatalf("--resume: exit %d:\n%s", code, out)
	}
	for _, want := range []string{"skipping a checkpoint that does not verify: checkpoint_000002", "resuming from checkpoint_000001", "resumed from checkpoint_000001 at iteration 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A storage path that fills up: the commit that does not fit fails with a clear message
// on the next report, and every checkpoint committed before it still verifies.
func TestFullStorage(t *testing.T) {
	storage := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", storage).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v: %s); needs root", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", storage).Run() })
	scratch, err := os.MkdirTemp("/dev/shm", "trainyard-scratch-")
	if err != nil {
		t.Skip("no /dev/shm for checkpoints on another filesystem")
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	// One rank: a checkpoint is committed once every rank made that report, so with two
	// ranks rank 0 may finish all its reports before the first commit fails.
	code, out := reportJob(t, storage, "full", []string{"--workers", "1", "--env", "TRAINYARD_SCRATCH_DIR=" + scratch},
		"--iterations", "8", "--bytes", "300000")
	if code != 1 || !strings.Contains(out, "an earlier checkpoint could not be committed") || !strings.Contains(out, "no space left on device") {
		t.Errorf("exit %d; want 1 and a report error saying the disk is full:\n%s", code, out)
	}
	names, _ := filepath.Glob(filepath.Join(storage, "full", "checkpoint_*"))
	if len(names) == 0 {
		t.Fatalf("no checkpoint was committed before the disk filled:\n%s", out)
	}
	for _, n := range names {
		if _, err := checkpoint.Verify(n); err != nil {
			t.Errorf("committed checkpoint lost or damaged: %v", err)
		}
	}
}

// A rank that fails before its first report of a resumed attempt leaves rank 0's part of
// that report uncommitted: the next attempt resumes from the last checkpoint that holds
// every rank's shard, and each rank finds its own.
func TestNoPartialShardedCheckpoint(t *testing.T) {
	storage, dir := t.TempDir(), t.TempDir()
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "shard_fault.py")
	code, out := run(t, dir, nil, "run", "--storage-path", storage, "--name", "shards", "--workers", "2",
		"--max-restarts", "2", "--", python, script, filepath.Join(dir, "rank0-reported"))
	if code != 0 {
		t.Fatalf("exit %d; want the run to succeed in attempt 3:\n%s", code, out)
	}
	for _, want := range []string{
		"rank 1 attempt 3: resumed from checkpoint_000002 at iteration 3",
		"is not kept: rank(s) 1 never made that report",
		"rank 1 done",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the output:\n%s", want, out)
		}
	}
}
