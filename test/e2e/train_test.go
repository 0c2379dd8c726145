package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/rundir"
)

type attemptRecord = rundir.Attempt

var accuracyLine = regexp.MustCompile(`epoch (\d+)/(\d+): .*test_accuracy=([\d.]+)%`)

// trainArgs runs the Fashion-MNIST example on a subset, small enough for 2 cores.
func trainArgs(t *testing.T, storage, name string, extra ...string) []string {
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	args := []string{"run", "--storage-path", storage, "--name", name, "--workers", "2"}
	args = append(args, extra...)
	return append(args, "--", python, script, "--epochs", "2", "--train-subset", "6000", "--test-subset", "2000")
}

// accuracies returns the per-epoch test accuracies rank 0 printed.
func accuracies(out string) []float64 {
	var acc []float64
	for _, m := range accuracyLine.FindAllStringSubmatch(out, -1) {
		a, _ := strconv.ParseFloat(m[3], 64)
		acc = append(acc, a)
	}
	return acc
}

// Two workers train the example with DDP over gloo and learn something.
func TestTrainFashionMNIST(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	code, out := run(t, repoRoot(t), nil, trainArgs(t, storage, "fm")...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	acc := accuracies(out)
	if len(acc) != 2 || acc[1] < 60 {
		t.Errorf("accuracies %v: want 2 epochs ending above 60%%\n%s", acc, out)
	}
	if !strings.Contains(out, "[rank 0 pid ") || !strings.Contains(out, "world_size=2 backend=gloo") {
		t.Errorf("output lacks rank prefixes or the 2-rank gloo start line:\n%s", out)
	}
	rec := readRecord(t, filepath.Join(storage, "fm"))
	if rec.Phase != "Succeeded" || len(rec.Attempts) != 1 {
		t.Errorf("record: phase %s, %d attempts", rec.Phase, len(rec.Attempts))
	}
}

// A worker SIGKILLed mid-run tears the gang down in about a second, the whole gang
// restarts (from the last checkpoint), and the run still succeeds.
func TestKilledWorkerRestartsGang(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	ty := start(t, repoRoot(t), nil, trainArgs(t, storage, "kill", "--max-restarts", "1")...)
	ty.out.waitFor(t, "epoch 1/2:", 5*time.Minute)
	rec := readRecord(t, filepath.Join(storage, "kill"))
	victim := rec.Attempts[0].Ranks[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank 1 (pid %d): %v", victim.PID, err)
	}
	code := ty.wait(t)
	out := ty.out.String()
	if code != 0 {
		t.Fatalf("exit %d, want 0 after one restart:\n%s", code, out)
	}
	rec = readRecord(t, filepath.Join(storage, "kill"))
	if len(rec.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2:\n%s", len(rec.Attempts), out)
	}
	first := rec.Attempts[0]
	if first.Outcome != "failed" || !strings.Contains(first.Reason, "rank 1 (worker 1, pid") || !strings.Contains(first.Reason, "SIGKILL") {
		t.Errorf("attempt 1: %s: %s; want rank 1 killed by SIGKILL", first.Outcome, first.Reason)
	}
	// The gang is gone once the last rank exited; generous bound for a loaded machine.
	if last := latestEnd(first); last.Sub(*first.Ranks[1].Ended) > 10*time.Second {
		t.Errorf("the gang took %s to go after rank 1 died", last.Sub(*first.Ranks[1].Ended))
	}
	if !strings.Contains(out, "attempt 2: starting") || !strings.Contains(out, "epoch 2/2") {
		t.Errorf("want a second attempt that finishes the training:\n%s", out)
	}
}

func latestEnd(a attemptRecord) time.Time {
	var last time.Time
	for _, r := range a.Ranks {
		if r.Ended != nil && r.Ended.After(last) {
			last = *r.Ended
		}
	}
	return last
}
