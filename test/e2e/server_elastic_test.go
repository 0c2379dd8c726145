package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// elasticJob is what `get -o json` says of an elastic job's size.
type elasticJob struct {
	Status     string `json:"status"`
	Message    string `json:"message"`
	Restarts   int    `json:"restarts"`
	Workers    int    `json:"workers"`
	MinWorkers int    `json:"minWorkers"`
	MaxWorkers int    `json:"maxWorkers"`
	Resizes    int    `json:"resizes"`
}

func (s *jobServer) elastic(t *testing.T, id string) elasticJob {
	t.Helper()
	code, out := s.cli(t, "get", id, "-o", "json")
	var d struct {
		Job elasticJob `json:"job"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("get %s -o json: exit %d\n%s", id, code, out)
	}
	return d.Job
}

// submitCore submits a job of one core per worker without waiting, and returns its ID.
func (s *jobServer) submitCore(t *testing.T, args ...string) string {
	t.Helper()
	code, out := s.cli(t, "submit", append([]string{"--no-wait", "--cpus-per-worker", "1"}, args...)...)
	id := strings.TrimSpace(out)
	if code != 0 || strings.ContainsAny(id, " \n") {
		t.Fatalf("submit: exit %d:\n%s", code, out)
	}
	return id
}

// waitLog waits until the file holds want.
func waitLog(t *testing.T, path, want string, timeout time.Duration, more func() string) string {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return string(b)
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s lacks %q after %s:\n%s\n%s", path, want, timeout, b, more())
	return ""
}

// An elastic job with real DDP on the job server (2 cores, a core per worker): with a
// job holding one core, `--workers 1:2` starts with 1 worker once --elastic-settle has
// passed; when the blocking job ends it grows to 2 at its next committed checkpoint; a
// job of higher priority shrinks it back to 1 instead of preempting it (its ranks save at
// the notice), and when that job ends it grows again. The ranks see WORLD_SIZE change and
// the previous one; no resize uses a restart, and the job succeeds.
func TestServerElasticJobStartsSmallAndGrows(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	s := newJobServer(t, dir, "--elastic-settle", "1s")
	t.Cleanup(func() { s.stopJobs(t) }) // newJobServer's cleanup then kills the server
	submit := func(args ...string) string { t.Helper(); return s.submitCore(t, args...) }
	release := filepath.Join(dir, "release")
	blocker := submit("--name", "blocker", "--", python, "-c",
		"import os, time\nwhile not os.path.exists("+pyString(release)+"): time.sleep(0.1)")
	s.waitStatus(t, blocker, 60*time.Second, "RUNNING")
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "elastic_resize.py")
	el := submit("--name", "elastic", "--workers", "1:2", "--env", "STEPS=400", "--env", "STEP_S=0.1", "--", python, script)
	console := filepath.Join(dir, "runs", el, "console.log")
	more := func() string { return s.out.String() }

	waitLog(t, console, "rank 0 world 1 previous None elastic 1:2 from step 0", 90*time.Second, more)
	if j := s.elastic(t, el); j.Workers != 1 || j.MinWorkers != 1 || j.MaxWorkers != 2 {
		t.Errorf("started elastic job: %+v, want 1 worker of 1:2", j)
	}
	if code, out := s.cli(t, "get", el); code != 0 || !strings.Contains(out, "Elastic:") || !strings.Contains(out, "1 (1:2)") {
		t.Errorf("get %s: exit %d\n%s", el, code, out)
	}
	waitLog(t, console, "step 10 world 1", 60*time.Second, more)
	writeFile(t, release, "")
	waitLog(t, console, "grew from 1 to 2 workers: 1 CPU free for 1 more worker; the gang goes on from its latest checkpoint (no restart used)", 90*time.Second, more)
	log := waitLog(t, console, "rank 1 world 2 previous 1 elastic 1:2 from step", 90*time.Second, more)
	if strings.Contains(log, "rank 1 world 2 previous 1 elastic 1:2 from step 0\n") {
		t.Errorf("the grown gang did not resume from a checkpoint:\n%s", log)
	}
	for deadline := time.Now().Add(30 * time.Second); s.elastic(t, el).Resizes < 1 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if j := s.elastic(t, el); j.Workers != 2 || j.Resizes != 1 {
		t.Errorf("grown elastic job: %+v, want 2 workers and 1 resize", j)
	}

	hi := submit("--name", "high", "--priority", "5", "--", python, "-c", "import time; print('high ran', flush=True); time.sleep(2)")
	// Messages call the job by the name its user gave it (issue 43), not its ID.
	waitLog(t, console, "resized from 2 to 1 workers: to make room for job high", 90*time.Second, more)
	if st := s.waitStatus(t, hi, 90*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
		t.Fatalf("high job %s:\n%s", st, s.out)
	}
	waitLog(t, console, "grew from 1 to 2 workers", 120*time.Second, more)
	if st := s.waitStatus(t, el, 180*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
		b, _ := os.ReadFile(console)
		t.Fatalf("elastic job %s:\n%s", st, b)
	}
	j := s.elastic(t, el)
	if j.Restarts != 0 || j.Resizes < 2 {
		t.Errorf("elastic job: %+v, want no restart and at least 2 resizes", j)
	}
	b, _ := os.ReadFile(console)
	if !strings.Contains(string(b), "saved at step") || !strings.Contains(string(b), "rank 1 done in a world of 2") {
		t.Errorf("the elastic job did not save at the shrink's notice, or did not end at 2 workers:\n%s", b)
	}
}

// An elastic job whose ranks listen for the preemption notice but save a checkpoint only
// when given it (CKPT_EVERY past its steps) does not wait forever to grow: once room
// returns, its --resize-interval (3s) passes without a checkpoint, the ranks get the
// notice and save, and the gang grows from that checkpoint, using no restart.
func TestServerElasticGrowAtTheResizeInterval(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	s := newJobServer(t, dir, "--elastic-settle", "1s")
	t.Cleanup(func() { s.stopJobs(t) }) // newJobServer's cleanup then kills the server
	release := filepath.Join(dir, "release")
	blocker := s.submitCore(t, "--name", "blocker", "--", python, "-c",
		"import os, time\nwhile not os.path.exists("+pyString(release)+"): time.sleep(0.1)")
	s.waitStatus(t, blocker, 60*time.Second, "RUNNING")
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "elastic_resize.py")
	el := s.submitCore(t, "--name", "elastic", "--workers", "1:2", "--resize-interval", "3s",
		"--env", "STEPS=120", "--env", "STEP_S=0.1", "--env", "CKPT_EVERY=1000", "--", python, script)
	console := filepath.Join(dir, "runs", el, "console.log")
	more := func() string { return s.out.String() }

	waitLog(t, console, "step 5 world 1", 90*time.Second, more)
	writeFile(t, release, "")
	waitLog(t, console, "asked to grow to 2 workers (1 CPU free for 1 more worker): the gang resizes at its next committed checkpoint, or in 3s without one", 60*time.Second, more)
	waitLog(t, console, "resizing to 2 workers: 1 CPU free for 1 more worker; no checkpoint committed within 3s: the ranks have until", 30*time.Second, more)
	waitLog(t, console, "committed after the preemption notice; stopping the gang", 30*time.Second, more)
	waitLog(t, console, "grew from 1 to 2 workers: 1 CPU free for 1 more worker; the gang goes on from its latest checkpoint (no restart used)", 30*time.Second, more)
	log := waitLog(t, console, "rank 1 world 2 previous 1 elastic 1:2 from step", 60*time.Second, more)
	if strings.Contains(log, "rank 1 world 2 previous 1 elastic 1:2 from step 0\n") {
		t.Errorf("the grown gang did not resume from the notice's checkpoint:\n%s", log)
	}
	if st := s.waitStatus(t, el, 120*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
		b, _ := os.ReadFile(console)
		t.Fatalf("elastic job %s:\n%s", st, b)
	}
	if j := s.elastic(t, el); j.Restarts != 0 || j.Resizes != 1 || j.Workers != 2 {
		t.Errorf("elastic job: %+v, want 2 workers after 1 resize and no restart", j)
	}
}
