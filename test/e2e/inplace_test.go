package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childPID finds the process that parent started running the example's train.py (a
// worker's rank).
func childPID(t *testing.T, parent int) int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		_, after, _ := strings.Cut(string(data), ") ") // the name may hold spaces
		f := strings.Fields(after)
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		dir := filepath.Dir(stat)
		if cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline")); strings.Contains(string(cmdline), "train.py") {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			return pid
		}
	}
	t.Fatalf("process %d has no child running train.py", parent)
	return 0
}

// waitSince waits (polling every 10 ms) until out holds text and returns when it did.
func waitSince(t *testing.T, out *lineBuffer, text string, timeout time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(out.String(), text) {
			return time.Now()
		}
	}
	t.Fatalf("no %q within %s:\n%s", text, timeout, out)
	return time.Time{}
}

// withRestarts sets spec.maxRestarts in a job made by podJob.
func withRestarts(t *testing.T, job string, n int) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(job), &m); err != nil {
		t.Fatal(err)
	}
	m["spec"].(map[string]any)["maxRestarts"] = n
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Two `trainyard worker` processes train the example with DDP; rank 1's Python is killed
// after the first checkpoint. Worker 0's coordinator stops the gang and starts attempt 2
// on the same two processes, which resumes from the checkpoint and finishes. The test logs
// the time from the kill to rank 0's start line of attempt 2 (printed once every rank is in
// the process group), and the same for `trainyard run`'s restart of the same gang.
func TestWorkerPodsRestartInPlace(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	dir := filepath.Join(storage, "inplace")
	job := withRestarts(t, podJob(t, storage, "inplace", 3, "--sleep-per-step", "0.02"), 1)
	pods := startPods(t, job, 1)
	waitForFile(t, filepath.Join(dir, "checkpoint_000001"), 2*time.Minute, pods[0].out)
	victim := childPID(t, pods[1].cmd.Process.Pid)
	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank 1 (pid %d): %v", victim, err)
	}
	back := waitSince(t, pods[0].out, "attempt=2", 2*time.Minute)
	inPlace := back.Sub(killed)
	for i, p := range pods {
		if p.cmd.ProcessState != nil || syscall.Kill(p.cmd.Process.Pid, 0) != nil {
			t.Fatalf("worker %d's process (pid %d) is gone: the gang did not restart in place\n%s", i, p.cmd.Process.Pid, p.out)
		}
	}
	for i, p := range pods {
		if code := p.wait(t); code != 0 {
			t.Fatalf("worker %d: exit %d\n%s", i, code, p.out)
		}
	}
	s0 := pods[0].readSummary(t)
	lastRestart := regexp.MustCompile(`^attempt 2 restarted in place after rank 1 \(worker 1, pid \d+\) was killed by SIGKILL`)
	if s0.Outcome != "succeeded" || s0.Attempt != 2 || s0.Restarts != 1 || s0.InPlace != 1 || !lastRestart.MatchString(s0.LastRestart) ||
		s0.Metrics["epoch"] != "3" {
		t.Errorf("worker 0's summary: %+v", s0)
	}
	if s1 := pods[1].readSummary(t); s1.Outcome != "succeeded" || s1.Attempt != 2 {
		t.Errorf("worker 1's summary: %+v", s1)
	}
	out0 := pods[0].out.String()
	for _, want := range []string{"restarting the gang in place as attempt 2 (restart 1 of 1)", "attempt 2: resuming from checkpoint_00000", "epoch 3/3"} {
		if !strings.Contains(out0, want) {
			t.Errorf("worker 0's console lacks %q:\n%s", want, out0)
		}
	}
	if !strings.Contains(pods[1].out.String(), "attempt 2: resuming from checkpoint_00000") {
		t.Errorf("worker 1 did not resume from a checkpoint:\n%s", pods[1].out)
	}
	if rec := readRecord(t, dir); rec.Phase != "Succeeded" || len(rec.Attempts) != 2 {
		t.Errorf("run.json: phase %s, %d attempts; want 2 attempts in one run", rec.Phase, len(rec.Attempts))
	}

	// The same gang under `trainyard run`, restarted by the local launcher.
	ty := start(t, repoRoot(t), nil, "run", "--storage-path", storage, "--name", "local", "--workers", "2", "--cpus-per-worker", "1",
		"--max-restarts", "1", "--", python, filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py"),
		"--epochs", "3", "--train-subset", "2000", "--test-subset", "500", "--sleep-per-step", "0.02")
	waitForFile(t, filepath.Join(storage, "local", "checkpoint_000001"), 2*time.Minute, ty.out)
	victim = readRecord(t, filepath.Join(storage, "local")).Attempts[0].Ranks[1].PID
	killed = time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank 1 (pid %d): %v", victim, err)
	}
	local := waitSince(t, ty.out, "attempt=2", 2*time.Minute).Sub(killed)
	if code := ty.wait(t); code != 0 {
		t.Fatalf("trainyard run: exit %d\n%s", code, ty.out)
	}
	t.Logf("rank 1 killed -> every rank of attempt 2 in the process group: in place (2 trainyard worker processes) %s, trainyard run %s (%.2fx)",
		inPlace.Round(time.Millisecond), local.Round(time.Millisecond), inPlace.Seconds()/local.Seconds())
}
