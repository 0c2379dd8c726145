package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kill -9 of the server while a real DDP job trains: the training goes on, the restarted
// server follows it to the end, and the job's full log and status are there.
func TestServerKilledDuringTraining(t *testing.T) {
	needTorch(t)
	s := newJobServer(t, t.TempDir())
	t.Cleanup(func() {
		s.stopJobs(t)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	code, out := s.cli(t, "submit", "--no-wait", "--workers", "2", "--", python, script, "--epochs", "3",
		"--train-subset", "6000", "--test-subset", "2000", "--sleep-per-step", "0.005")
	id := strings.TrimSpace(out)
	if code != 0 || strings.ContainsAny(id, " \n") {
		t.Fatalf("submit: exit %d:\n%s", code, out)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, out := s.cli(t, "logs", id); strings.Contains(out, "epoch 1/3") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no epoch 1 within 3 minutes; server output:\n%s", s.out)
		}
	}
	_ = s.cmd.Process.Kill() // kill -9: no chance to clean up
	_ = s.cmd.Wait()
	s.start(t)
	if st := s.waitStatus(t, id, 5*time.Minute, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
		_, logs := s.cli(t, "logs", id)
		t.Fatalf("job %s after the server was killed mid-training, want SUCCEEDED:\n%s", st, logs)
	}
	_, logs := s.cli(t, "logs", id)
	for _, want := range []string{"epoch 1/3", "epoch 2/3", "epoch 3/3", "done: final test_accuracy"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the job's log lacks %q:\n%s", want, logs)
		}
	}
	if _, out := s.cli(t, "get", id); !strings.Contains(out, "attempt") {
		t.Errorf("get does not show the attempt:\n%s", out)
	}
}
