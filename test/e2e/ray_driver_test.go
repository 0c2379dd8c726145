package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	rayDriverResult = regexp.MustCompile(`DRIVER RESULT checkpoint=(\S+) epoch=2 saved_epoch=2 path=(\S+)`)
	rayDriverWorker = regexp.MustCompile(`WORKER rank=(\d) world=2 start=(\d) module=__main__ name=(\S+)`)
)

// runRayDriver runs testdata/ray_driver.py as one plain process (no --workers): its fit(),
// under if __name__ == "__main__":, launches the gang of ScalingConfig(num_workers=2) as
// the run <storage>/gang. It returns the output and the gang's run folder.
func runRayDriver(t *testing.T, scriptArgs ...string) (string, string) {
	t.Helper()
	needPlainTorch(t)
	storage := t.TempDir()
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_driver.py")
	args := append([]string{"run", "--storage-path", storage, "--name", "driver", "--", python, script, "--name", "gang"},
		scriptArgs...)
	code, out := run(t, t.TempDir(), []string{"PYTHONPATH=", "PYTHONUSERBASE=" + t.TempDir()}, args...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	gang := filepath.Join(storage, "gang")
	if rec := readRecord(t, gang); rec.Phase != "Succeeded" {
		t.Errorf("the gang's run: phase %s, want Succeeded", rec.Phase)
	}
	if drivers := strings.Count(out, "DRIVER pid="); drivers != 1 {
		t.Errorf("the __main__ block ran %d times, want once (the workers never run the script):\n%s", drivers, out)
	}
	return out, gang
}

// checkDriverResult checks that the driver printed the Result of the gang's run: its
// latest committed checkpoint (CheckpointConfig(num_to_keep=2) kept the last two).
func checkDriverResult(t *testing.T, out, gang string) {
	t.Helper()
	checkpoints := committedCheckpoints(t, gang)
	if len(checkpoints) != 2 {
		t.Fatalf("committed checkpoints %v, want the last 2 of 3 (num_to_keep=2)\n%s", checkpoints, out)
	}
	m := rayDriverResult.FindStringSubmatch(out)
	if m == nil || m[1] != checkpoints[1] || m[2] != gang {
		t.Errorf("driver's Result %v, want checkpoint %s in %s:\n%s", m, checkpoints[1], gang, out)
	}
}

// A Ray Train script run as `trainyard run -- python3 script.py` is the driver: fit()
// launches a gang of 2 through trainyard run, each worker runs the loop the driver sent it
// by value (its globals with it: the args the script's top level parsed from its argv; in
// the loop, __name__ is the script's, as in Ray), and fit() returns the gang's latest
// checkpoint.
func TestRayDriverLaunchesTheGang(t *testing.T) {
	out, gang := runRayDriver(t)
	workers := rayDriverWorker.FindAllStringSubmatch(out, -1)
	if len(workers) != 2 {
		t.Fatalf("WORKER lines %v, want one from each of 2 ranks:\n%s", workers, out)
	}
	for _, w := range workers {
		if w[2] != "0" || w[3] != "gang" {
			t.Errorf("worker %s started at epoch %s with --name %s, want 0 and the driver's argv (gang)", w[1], w[2], w[3])
		}
	}
	checkDriverResult(t, out, gang)
	if _, err := os.Stat(filepath.Join(gang, "..", "driver", "ray-driver", "gang.pkl")); err != nil {
		t.Errorf("the loop's spec is not in the driver's run folder: %v", err)
	}
}

// With FailureConfig(max_failures=1), a worker that fails in the gang's first attempt is
// restarted with the whole gang, which resumes from the latest committed checkpoint.
func TestRayDriverRestartsFromCheckpoint(t *testing.T) {
	out, gang := runRayDriver(t, "--fail-once")
	if rec := readRecord(t, gang); len(rec.Attempts) != 2 {
		t.Errorf("the gang ran %d attempts, want 2 (one restart)", len(rec.Attempts))
	}
	resumed := 0
	for _, w := range rayDriverWorker.FindAllStringSubmatch(out, -1) {
		if w[2] == "1" {
			resumed++
		}
	}
	if resumed != 2 {
		t.Errorf("%d workers resumed at epoch 1 after the restart, want 2:\n%s", resumed, out)
	}
	checkDriverResult(t, out, gang)
}

// A driver's gang that fails for good raises TrainingFailedError with the failed rank's
// exception and traceback, as Ray's does; TorchTrainer.restore then continues the run with
// its own CheckpointConfig (2 checkpoints kept) and FailureConfig, and the Result prints
// as Ray's, one attribute a line.
func TestRayDriverFailureThenRestore(t *testing.T) {
	needPlainTorch(t)
	storage := t.TempDir()
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_failure.py")
	code, out := run(t, t.TempDir(), []string{"PYTHONPATH=", "PYTHONUSERBASE=" + t.TempDir()},
		"run", "--storage-path", storage, "--name", "driver", "--", python, script)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	gang := filepath.Join(storage, "gang")
	for _, want := range []string{
		"DRIVER FAILED worker_failures={1: 'ValueError'}",
		"Training failed due to worker errors:",
		"Terminating training worker group after encountering failure(s) on 1 worker(s):",
		"[Rank 1]",
		"Traceback (most recent call last):",
		script + `", line`,
		`raise ValueError(f"injected failure at epoch {epoch}")`,
		"ValueError: injected failure at epoch 2",
		"DRIVER RESTORED num_to_keep=2 max_failures=1",
		"DRIVER RESULT Result(",
		"  metrics={'epoch': 3},",
		"  path='" + gang + "',",
		"  filesystem='local',",
		"  checkpoint=Checkpoint(filesystem=local, path=" + filepath.Join(gang, "checkpoint_"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
	_, message, _ := strings.Cut(out, "Terminating training worker group")
	message, _, _ = strings.Cut(message, "(the training gang:")
	if strings.Contains(message, "_worker.py") || strings.Contains(message, "_trainer.py") {
		t.Errorf("the error's traceback shows Trainyard's own frames:\n%s", message)
	}
	if rec := readRecord(t, gang); rec.Phase != "Succeeded" || len(rec.Attempts) != 3 {
		t.Errorf("the gang's run: phase %s after %d attempts, want Succeeded after 3 (2 failed, 1 restored)",
			rec.Phase, len(rec.Attempts))
	}
	if got := committedCheckpoints(t, gang); len(got) != 2 {
		t.Errorf("committed checkpoints %v, want the last 2 (the restored run's num_to_keep=2)", got)
	}
}

// A driver with no main guard: its top level and its code after fit() run once. A loop
// that uses a global open file is refused at fit(), naming the global and saying what to
// do; a lambda that closes over a local and calls a recursive function of the script runs
// on both ranks, as Ray's cloudpickle would send it.
func TestRayDriverSendsTheLoopByValue(t *testing.T) {
	needPlainTorch(t)
	storage := t.TempDir()
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_by_value.py")
	code, out := run(t, t.TempDir(), []string{"PYTHONPATH=", "PYTHONUSERBASE=" + t.TempDir()},
		"run", "--storage-path", storage, "--name", "driver", "--", python, script)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for line, want := range map[string]int{"] TOP pid=": 1, "] AFTER FIT path=" + filepath.Join(storage, "gang"): 1,
		"] LOOP lambda rank=0 fib=155": 1, "] LOOP lambda rank=1 fib=155": 1} {
		if n := strings.Count(out, line); n != want {
			t.Errorf("%q printed %d times, want %d:\n%s", line, n, want, out)
		}
	}
	refused := "] REFUSED TorchTrainer.fit(): cannot send the training loop to the workers: the global 'log' " +
		"that reads_the_log() uses (a _io.TextIOWrapper) cannot be pickled (TypeError: cannot pickle " +
		"'_io.TextIOWrapper' object)."
	if !strings.Contains(out, refused) || !strings.Contains(out, "Create such an object inside train_loop_per_worker") {
		t.Errorf("want %q, and what to do:\n%s", refused, out)
	}
}
