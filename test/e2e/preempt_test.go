package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM to trainyard run in the middle of epoch 2: the ranks hear the preemption notice,
// save a checkpoint at the step they reached, the launcher commits it and stops the gang
// (exit 130, run.json Interrupted with one preemption, no restart used); running the same
// command again continues from that step, not from the start of epoch 2.
func TestCheckpointOnPreemption(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	args := fourEpochs(t, storage, "preempted", "--max-restarts", "2")
	ty := start(t, repoRoot(t), nil, args...)
	waitForFile(t, filepath.Join(storage, "preempted", "checkpoint_000001"), 5*time.Minute, ty.out)
	time.Sleep(time.Second) // into epoch 2
	sent := time.Now()
	if err := ty.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := ty.wait(t)
	took := time.Since(sent)
	out := ty.out.String()
	if code != 130 {
		t.Fatalf("exit %d after SIGTERM, want 130:\n%s", code, out)
	}
	saved := regexp.MustCompile(`preempted \(SIGTERM\): saving epoch 2 at step (\d+)`).FindStringSubmatch(out)
	if saved == nil {
		t.Fatalf("the ranks did not save at the notice:\n%s", out)
	}
	for _, s := range []string{"SIGTERM: the ranks have until", "checkpoint_000002 committed after the preemption notice",
		"run preempted preempted in attempt 1 (SIGTERM; checkpoint_000002 committed after the notice)"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	t.Logf("SIGTERM -> checkpoint at step %s committed and the gang gone: %s", saved[1], took.Round(time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("the stop took %s: it waited for the deadline, not for the commit", took)
	}
	rec := readRecord(t, filepath.Join(storage, "preempted"))
	if rec.Phase != "Interrupted" || rec.Preemptions != 1 || len(rec.Attempts) != 1 {
		t.Errorf("run.json: phase %s, %d preemptions, %d attempts; want Interrupted, 1, 1", rec.Phase, rec.Preemptions, len(rec.Attempts))
	}
	step, _ := strconv.Atoi(saved[1])
	if step <= 0 {
		t.Fatalf("saved at step %d", step)
	}

	code, out = run(t, repoRoot(t), nil, args...)
	if code != 0 {
		t.Fatalf("the run started again: exit %d\n%s", code, out)
	}
	want := fmt.Sprintf("resuming from checkpoint_000002: epoch 2 at step %d, continuing at step %d", step, step+1)
	for _, s := range []string{want, "epoch 2/4", "epoch 4/4"} {
		if !strings.Contains(out, s) {
			t.Errorf("the second run's output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "epoch 1/4") {
		t.Errorf("the second run trained epoch 1 again:\n%s", out)
	}
}

// A run that never reports through the helper cannot hear the notice: SIGTERM stops it at
// once, as before; a closed standard output (trainyard run | head) does not stop the run.
func TestSignalsToARunWithoutTheHelper(t *testing.T) {
	storage := t.TempDir()
	ty := start(t, repoRoot(t), nil, "run", "--storage-path", storage, "--name", "plain", "--workers", "2",
		"--", "/bin/sh", "-c", "echo started; sleep 300")
	ty.out.waitFor(t, "started", time.Minute)
	sent := time.Now()
	if err := ty.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := ty.wait(t); code != 130 {
		t.Fatalf("exit %d after SIGHUP, want 130:\n%s", code, ty.out)
	}
	if took := time.Since(sent); took > 10*time.Second {
		t.Errorf("SIGHUP took %s to stop ranks that cannot hear the notice", took)
	}
	rec := readRecord(t, filepath.Join(storage, "plain"))
	if rec.Phase != "Interrupted" || !strings.HasPrefix(rec.Reason, "preempted in attempt 1 (SIGHUP)") {
		t.Errorf("run.json: %s %q; want Interrupted by SIGHUP", rec.Phase, rec.Reason)
	}

	// Standard output closed after the first line: the run still ends as its ranks do.
	sh := fmt.Sprintf("%s run --storage-path %s --name piped --workers 2 -- /bin/sh -c 'for i in 1 2 3 4 5 6; do echo line $i; sleep 0.2; done' | head -n 1; sleep 5",
		binary, storage)
	if out, err := exec.Command("/bin/bash", "-c", sh).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rec = readRecord(t, filepath.Join(storage, "piped"))
	if rec.Phase != "Succeeded" {
		t.Errorf("a run whose stdout closed: %s %q; want Succeeded (its ranks all exited 0)", rec.Phase, rec.Reason)
	}
}

// The example's checkpoints say where to continue: after an epoch (the next epoch), or
// after some steps of one, zero included (a preemption at the epoch's first step must not
// skip it: the cluster test once resumed such a checkpoint at the next epoch).
func TestExampleCheckpointPositions(t *testing.T) {
	needTorch(t)
	script := `import os, sys, tempfile
sys.path.insert(0, sys.argv[1])
os.environ["TRAINYARD_SCRATCH_DIR"] = tempfile.mkdtemp()
import train, torch
m = train.build_model(); o = torch.optim.SGD(m.parameters(), lr=0.1)
for step in (None, 0, 40):
    os.environ["TRAINYARD_CHECKPOINT"] = train.save_checkpoint(m, o, 7, step)
    print("got", step, train.load_checkpoint(m, o, {"rank": 1, "device": "cpu"}, 10)[:2])
`
	cmd := exec.Command(python, "-c", script, filepath.Join(repoRoot(t), "examples", "fashion-mnist"))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repoRoot(t), "python"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"got None (8, 0)", "got 0 (7, 0)", "got 40 (7, 40)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
