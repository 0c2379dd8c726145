package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// preemptibleScript checkpoints every 20 steps of 0.1 s and, at the preemption notice,
// at the step it reached; started again, it continues after its checkpoint's step, to
// step 60.
const preemptibleScript = `import os, time
import trainyard

def save(step):
    folder = trainyard.new_checkpoint_dir()
    with open(os.path.join(folder, "step"), "w") as f:
        f.write(str(step))
    trainyard.report({"step": step}, checkpoint=folder)

ckpt = trainyard.get_checkpoint()
first = 1
if ckpt:
    with open(os.path.join(ckpt, "step")) as f:
        first = int(f.read()) + 1
    print(f"resumed after step {first - 1}", flush=True)
for step in range(first, 61):
    time.sleep(0.1)
    print(f"step {step}", flush=True)
    if trainyard.preemption() is not None:
        save(step)
        print(f"saved at step {step} on the notice", flush=True)
        time.sleep(60)  # the launcher stops the gang once the checkpoint is committed
    if step % 20 == 0:
        save(step)
print("done", flush=True)
`

// preemptionJob is what `get -o json` says of a job's preemptions.
type preemptionJob struct {
	Status      string `json:"status"`
	Message     string `json:"message"`
	Restarts    int    `json:"restarts"`
	Preemptions int    `json:"preemptions"`
	Preempting  bool   `json:"preempting"`
	Preemption  *struct {
		For         string `json:"for"`
		ForPriority int    `json:"forPriority"`
	} `json:"preemption"`
}

// preemption returns what the server says of a job's preemptions.
func (s *jobServer) preemption(t *testing.T, id string) preemptionJob {
	t.Helper()
	code, out := s.cli(t, "get", id, "-o", "json")
	var d struct {
		Job preemptionJob `json:"job"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("get %s -o json: exit %d\n%s", id, code, out)
	}
	return d.Job
}

// A job of priority 5 submitted while one of priority 0 holds every core: the server
// preempts the low job (its ranks hear the notice and save at the step they reached), the
// job goes back to the queue counting a preemption and no restart, the high job runs, and
// then the low job resumes from the step it saved, in the same run folder.
func TestServerPreemptsLowerPriority(t *testing.T) {
	dir := t.TempDir()
	s := newJobServer(t, dir)
	t.Cleanup(func() {
		s.stopJobs(t)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	script := filepath.Join(dir, "train.py")
	writeFile(t, script, preemptibleScript)
	cores := strconv.Itoa(runtime.NumCPU())
	submit := func(args ...string) string {
		t.Helper()
		code, out := s.cli(t, "submit", append([]string{"--no-wait", "--cpus-per-worker", cores}, args...)...)
		id := strings.TrimSpace(out)
		if code != 0 || strings.ContainsAny(id, " \n") {
			t.Fatalf("submit: exit %d:\n%s", code, out)
		}
		return id
	}
	low := submit("--name", "low", "--", python, script)
	runDir := filepath.Join(dir, "runs", low)
	waitForFile(t, filepath.Join(runDir, "checkpoint_000001"), 60*time.Second, s.out)
	hi := submit("--name", "high", "--priority", "5", "--", python, "-c", "import time; print('high ran', flush=True); time.sleep(2)")

	s.waitStatus(t, low, 60*time.Second, "PENDING")
	requeued := s.preemption(t, low)
	// Messages call the job by the name its user gave it (issue 43); Preemption.For is its ID.
	want := "preempted by job high (priority 5); requeued, resumes from its latest checkpoint (preemption 1)"
	if requeued.Preemptions != 1 || requeued.Restarts != 0 || !strings.HasPrefix(requeued.Message, want) ||
		requeued.Preemption == nil || requeued.Preemption.For != hi {
		t.Errorf("requeued low job: %+v; want 1 preemption for %s, 0 restarts, message %q", requeued, hi, want)
	}
	if st := s.waitStatus(t, hi, 60*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
		t.Fatalf("high job %s:\n%s", st, s.out)
	}
	if st := s.waitStatus(t, low, 120*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
		t.Fatalf("low job %s (%s):\n%s", st, s.preemption(t, low).Message, s.out)
	}
	log, _ := os.ReadFile(filepath.Join(runDir, "console.log"))
	saved := regexp.MustCompile(`saved at step (\d+) on the notice`).FindStringSubmatch(string(log))
	if saved == nil || !strings.Contains(string(log), "resumed after step "+saved[1]+"\n") || !strings.Contains(string(log), "done") {
		t.Errorf("the low job did not save at the notice and resume from there:\n%s", log)
	}
	if notice := "preempted by job high (priority 5): the ranks have until"; !strings.Contains(string(log), notice) {
		t.Errorf("the supervisor's notice does not say who preempted the job (%q):\n%s", notice, log)
	}
	rec := readRecord(t, runDir)
	if done := s.preemption(t, low); len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != "interrupted" ||
		done.Preemptions != 1 || done.Restarts != 0 {
		t.Errorf("low job: %d attempts (the first %q), %d preemption(s), %d restart(s); want 2, interrupted, 1, 0",
			len(rec.Attempts), rec.Attempts[0].Outcome, done.Preemptions, done.Restarts)
	}
	code, out := s.cli(t, "get", low)
	if code != 0 || !strings.Contains(out, "Preemptions:  1, the latest for job "+hi+" (priority 5)") {
		t.Errorf("get %s: exit %d\n%s", low, code, out)
	}
	code, out = s.cli(t, "list")
	if code != 0 || !strings.Contains(out, "SUCCEEDED (preempted 1x)") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
}
