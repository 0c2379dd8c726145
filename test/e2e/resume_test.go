package e2e

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/rundir"
)

// fourEpochs runs the example for 4 epochs on a subset; sleep slows steps so that a test
// can kill something mid-run.
func fourEpochs(t *testing.T, storage, name string, flags ...string) []string {
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	args := append([]string{"run", "--storage-path", storage, "--name", name, "--workers", "2"}, flags...)
	return append(args, "--", python, script, "--epochs", "4", "--train-subset", "6000",
		"--test-subset", "2000", "--sleep-per-step", "0.005")
}

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string, timeout time.Duration, out *lineBuffer) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within %s:\n%s", path, timeout, out)
}

// A rank SIGKILLed after epoch 2 of 4: the gang restarts, resumes from checkpoint 2, and
// ends within 1.5 points of the accuracy of an uninterrupted run with the same seed.
func TestResumeAfterKilledRank(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	code, out := run(t, repoRoot(t), nil, fourEpochs(t, storage, "straight")...)
	if code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, out)
	}
	want := accuracies(out)

	ty := start(t, repoRoot(t), nil, fourEpochs(t, storage, "killed", "--max-restarts", "1")...)
	waitForFile(t, filepath.Join(storage, "killed", "checkpoint_000002"), 5*time.Minute, ty.out)
	victim := readRecord(t, filepath.Join(storage, "killed")).Attempts[0].Ranks[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := ty.wait(t); code != 0 {
		t.Fatalf("exit %d after the kill:\n%s", code, ty.out)
	}
	out = ty.out.String()
	for _, s := range []string{"attempt 2: resuming from checkpoint_000002", "resuming from checkpoint_000002: epoch 2 done, continuing at 3", "epoch 4/4"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	got := accuracies(out)
	if len(want) != 4 || len(got) < 4 || math.Abs(got[len(got)-1]-want[3]) > 1.5 {
		t.Errorf("final accuracy %v, uninterrupted %v: want within 1.5 points", got, want)
	}
}

// trainyard itself SIGKILLed: its workers go with it, and running it again resumes the run.
func TestResumeAfterTrainyardKilled(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	ty := start(t, repoRoot(t), nil, fourEpochs(t, storage, "again")...)
	waitForFile(t, filepath.Join(storage, "again", "checkpoint_000001"), 5*time.Minute, ty.out)
	if err := ty.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ty.wait(t)
	for _, r := range readRecord(t, filepath.Join(storage, "again")).Attempts[0].Ranks {
		if !processGone(r.PID) {
			t.Errorf("rank %d (pid %d) outlived the killed trainyard", r.Rank, r.PID)
		}
	}
	// run.json still says Running; results sees no launcher holds the folder (issue 24).
	code, out := run(t, repoRoot(t), nil, "results", "--storage-path", storage, "-o", "json")
	if code != 0 || !strings.Contains(out, `"status": "Interrupted"`) || !strings.Contains(out, "is gone without recording how the run ended") {
		t.Errorf("results after the launcher was killed: exit %d, want the run Interrupted with why:\n%s", code, out)
	}
	code, out = run(t, repoRoot(t), nil, fourEpochs(t, storage, "again")...)
	if code != 0 || !strings.Contains(out, "attempt 2: resuming from checkpoint_00000") || !strings.Contains(out, "epoch 4/4") {
		t.Errorf("second run: exit %d\n%s", code, out)
	}
}

// trainyard SIGKILLed at random moments, over and over: a resume never sees a checkpoint
// that does not verify, and the run ends all the same.
func TestKillDuringCommits(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	dir := filepath.Join(storage, "chaos")
	for range 4 {
		if succeeded(dir) { // a kill came too late: the run had already finished
			break
		}
		ty := start(t, repoRoot(t), nil, fourEpochs(t, storage, "chaos")...)
		ty.out.waitFor(t, "starting fashion-mnist", 2*time.Minute)
		time.Sleep(time.Duration(1000+rand.IntN(4000)) * time.Millisecond)
		_ = ty.cmd.Process.Kill()
		ty.wait(t)
		assertCheckpointsVerify(t, dir)
	}
	if !succeeded(dir) {
		code, out := run(t, repoRoot(t), nil, fourEpochs(t, storage, "chaos")...)
		if code != 0 {
			t.Fatalf("final run: exit %d\n%s", code, out)
		}
	}
	assertCheckpointsVerify(t, dir)
	if !succeeded(dir) {
		t.Error("the run did not succeed in the end")
	}
}

// succeeded reports whether the run in dir has succeeded.
func succeeded(dir string) bool {
	rec, err := rundir.ReadRecord(dir)
	return err == nil && rec.Phase == "Succeeded"
}

func assertCheckpointsVerify(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "checkpoint_*"))
	for _, n := range names {
		if _, err := checkpoint.Verify(n); err != nil {
			t.Errorf("a visible checkpoint does not verify: %v", err)
		}
	}
}

// processGone waits a little for pid to be gone (or a zombie).
func processGone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return true
		}
		if data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && strings.Contains(string(data), ") Z ") {
			return true
		}
	}
	return false
}

// The example resumed when its last epoch is done (the same command again, with
// --resume) trains nothing and says so: it resumed from the checkpoint of that epoch,
// training had finished, and the final accuracy is that checkpoint's, never 0.00%.
func TestExampleResumedAfterLastEpoch(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	args := func(flags ...string) []string {
		args := append([]string{"run", "--storage-path", storage, "--name", "done", "--workers", "2"}, flags...)
		return append(args, "--", python, script, "--epochs", "1", "--train-subset", "2000", "--test-subset", "1000")
	}
	code, out := run(t, repoRoot(t), nil, args()...)
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	acc := accuracies(out)
	if len(acc) != 1 {
		t.Fatalf("first run: accuracies %v, want 1 epoch:\n%s", acc, out)
	}
	final := "done: final test_accuracy=" + strconv.FormatFloat(acc[0], 'f', 2, 64) + "%"
	if !strings.Contains(out, final+"\n") {
		t.Errorf("first run lacks %q:\n%s", final, out)
	}

	code, out = run(t, repoRoot(t), nil, args("--resume")...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"resumed from checkpoint_000001, the checkpoint of epoch 1: training had already finished (--epochs 1)",
		final + " (of checkpoint_000001; nothing was left to train)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("second run lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "test_accuracy=0.00%") || strings.Contains(out, "epoch 1/1:") {
		t.Errorf("second run trained, or said 0.00%%:\n%s", out)
	}
}
