package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/jobs"
)

// serverJob is what `get -o json` says of a job.
type serverJob struct {
	Status  string  `json:"status"`
	Message string  `json:"message"`
	GPUs    [][]int `json:"gpus"`
	RunDir  string  `json:"runDir"`
}

// job returns what the server says of a job.
func (s *jobServer) job(t *testing.T, id string) serverJob {
	t.Helper()
	code, out := s.cli(t, "get", id, "-o", "json")
	var d struct {
		Job serverJob `json:"job"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("get %s -o json: exit %d\n%s", id, code, out)
	}
	return d.Job
}

// restartWith stops the server (SIGTERM; its jobs go on) and starts it again with the
// environment base and env.
func (s *jobServer) restartWith(t *testing.T, base []string, env ...string) {
	t.Helper()
	s.stop(t)
	s.env = append(slices.Clone(base), env...)
	s.start(t)
}

// stop stops the server with SIGTERM and waits until it has exited.
func (s *jobServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("the server exited with %v after SIGTERM:\n%s", err, s.out)
	}
}

// exited waits until the server exits by itself and returns its exit code.
func (s *jobServer) exited(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		t.Fatalf("the server did not exit by itself within 60s:\n%s", s.out)
		return 0
	}
}

// supervisors returns the live processes whose command line ends with `run -f spec`.
func supervisors(spec string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if err == nil && len(args) >= 3 && slices.Equal(args[len(args)-3:], []string{"run", "-f", spec}) && !processGone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killSession sends SIGKILL to every process of the session sid: a supervisor and its
// workers, as a crash would end them.
func killSession(t *testing.T, sid int) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 3 && fields[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if !processGone(sid) {
		t.Fatalf("supervisor %d outlived SIGKILL", sid)
	}
}

// The server killed between recording a job's placement and starting its supervisor,
// or between starting it and recording its pid: the restarted server starts the job
// once, or adopts the supervisor that runs, on the GPUs it recorded, and the job
// succeeds. Before, the job stayed PENDING, was started again on the same run folder,
// failed on its lock, and its first gang went on on GPUs the scheduler thought free.
func TestServerCrashWhileStarting(t *testing.T) {
	for _, fault := range []string{jobs.FaultAfterRecord, jobs.FaultAfterLaunch} {
		t.Run(fault, func(t *testing.T) {
			dir := t.TempDir()
			s := newJobServer(t, dir)
			t.Cleanup(func() {
				s.stopJobs(t)
				_ = s.cmd.Process.Kill()
				_ = s.cmd.Wait()
			})
			base, gpus := slices.Clone(s.env), fakeSMI(t)
			s.restartWith(t, base, append(gpus, jobs.FaultEnv+"="+fault)...)
			starts, gate := filepath.Join(dir, "starts"), filepath.Join(dir, "go")
			// The server may die at the fault before it answers the submit (the scheduler
			// places the job as soon as it is recorded), so the job's ID is chosen here and
			// a connection cut short is as good an answer as the ID.
			id := "crashed"
			code, out := s.cli(t, "submit", "--no-wait", "--id", id, "--gpus-per-worker", "1", "--",
				"sh", "-c", "echo start >> "+starts+"; while [ ! -e "+gate+" ]; do sleep 0.1; done; echo done")
			if answered := strings.TrimSpace(out) == id; code == 0 && !answered ||
				code != 0 && !strings.Contains(out, "EOF") && !strings.Contains(out, "connection reset") {
				t.Fatalf("submit: exit %d:\n%s", code, out)
			}
			if code := s.exited(t); code != 137 {
				t.Fatalf("the server exited with %d at the fault, want 137:\n%s", code, s.out)
			}

			s.env = append(slices.Clone(base), gpus...)
			s.start(t)
			spec := filepath.Join(dir, "state", "specs", id+".yaml")
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				j := s.job(t, id)
				if j.Status == "RUNNING" && len(supervisors(spec)) == 1 {
					if diff := cmp.Diff([][]int{{0}}, j.GPUs); diff != "" {
						t.Errorf("the running job's GPUs (-want +got):\n%s", diff)
					}
					break
				}
				if j.Status != "RUNNING" || time.Now().After(deadline) {
					t.Fatalf("job %s (%s) with supervisors %v, want RUNNING under one supervisor; server output:\n%s",
						j.Status, j.Message, supervisors(spec), s.out)
				}
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if st := s.waitStatus(t, id, 60*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
				t.Fatalf("job %s (%s), want SUCCEEDED; server output:\n%s", st, s.job(t, id).Message, s.out)
			}
			data, _ := os.ReadFile(starts)
			rec := readRecord(t, s.job(t, id).RunDir)
			if n := strings.Count(string(data), "start"); n != 1 || len(rec.Attempts) != 1 {
				t.Errorf("the job started %d time(s), in %d attempt(s); want once", n, len(rec.Attempts))
			}
		})
	}
}

// trainScript commits a checkpoint at steps 1 and 2, then waits to be killed; started
// again from a checkpoint, it runs two more steps and ends.
const trainScript = `import os, time
import trainyard

ckpt = trainyard.get_checkpoint()
first = 1
if ckpt:
    with open(os.path.join(ckpt, "step")) as f:
        first = int(f.read()) + 1
    print(f"resumed after step {first - 1}", flush=True)
for step in range(first, first + 2):
    folder = trainyard.new_checkpoint_dir()
    with open(os.path.join(folder, "step"), "w") as f:
        f.write(str(step))
    trainyard.report({"step": step}, checkpoint=folder)
    print(f"step {step}", flush=True)
if not ckpt:
    print("waiting to be killed", flush=True)
    time.sleep(600)
`

// A job's supervisor and workers SIGKILLed while the server is down, as a crash of the
// machine would end them: the restarted server queues the job again when it has a
// restart left, and its new supervisor continues the run folder from the latest
// checkpoint; with no restart left the job fails and says why. Before, it failed.
func TestServerRestartsDeadSupervisor(t *testing.T) {
	cases := map[string]struct {
		maxRestarts string
		want        string
	}{
		"a restart left": {maxRestarts: "1", want: "SUCCEEDED"},
		"no restarts":    {maxRestarts: "0", want: "FAILED"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := newJobServer(t, dir)
			t.Cleanup(func() {
				s.stopJobs(t)
				_ = s.cmd.Process.Kill()
				_ = s.cmd.Wait()
			})
			script := filepath.Join(dir, "train.py")
			writeFile(t, script, trainScript)
			code, out := s.cli(t, "submit", "--no-wait", "--max-restarts", tc.maxRestarts, "--", python, script)
			id := strings.TrimSpace(out)
			if code != 0 || strings.ContainsAny(id, " \n") {
				t.Fatalf("submit: exit %d:\n%s", code, out)
			}
			runDir := filepath.Join(dir, "runs", id)
			waitForFile(t, filepath.Join(runDir, "checkpoint_000002"), 60*time.Second, s.out)

			s.stop(t)
			killSession(t, readRecord(t, runDir).Supervisor)
			s.start(t)
			if st := s.waitStatus(t, id, 60*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != tc.want {
				t.Fatalf("job %s (%s), want %s; server output:\n%s", st, s.job(t, id).Message, tc.want, s.out)
			}
			t.Logf("job %s: %s", tc.want, s.job(t, id).Message)
			log, _ := os.ReadFile(filepath.Join(runDir, "console.log"))
			attempts := len(readRecord(t, runDir).Attempts)
			if tc.want == "FAILED" {
				if msg := s.job(t, id).Message; !strings.Contains(msg, "its supervisor (pid ") || attempts != 1 {
					t.Errorf("failed job: %q after %d attempt(s), want the dead supervisor and 1 attempt", msg, attempts)
				}
				return
			}
			if want := "restarting from its latest checkpoint (restart 1 of 1)"; !strings.Contains(s.out.String(), want) {
				t.Errorf("server output lacks %q:\n%s", want, s.out)
			}
			for _, want := range []string{"attempt 2: resuming from checkpoint_000002", "resumed after step 2", "step 4"} {
				if !strings.Contains(string(log), want) {
					t.Errorf("console log lacks %q:\n%s", want, log)
				}
			}
			if attempts != 2 {
				t.Errorf("%d attempts, want 2 (the first, then its continuation)", attempts)
			}
		})
	}
}
