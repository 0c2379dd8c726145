package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jobServer is a `trainyard server` started by a test, with what its CLI clients need.
type jobServer struct {
	cmd  *exec.Cmd
	out  *lineBuffer
	addr string   // http://127.0.0.1:<port>
	dir  string   // the folder clients run in
	env  []string // TRAINYARD_TOKEN_FILE, shared by the server and its clients
	args []string // the server's arguments, to start it again
}

// freePort returns a loopback port that nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newJobServer starts a server on a free loopback port with its state, storage and token
// file in dir, and more flags, and waits until it answers /healthz.
func newJobServer(t *testing.T, dir string, flags ...string) *jobServer {
	t.Helper()
	port := freePort(t)
	s := &jobServer{addr: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir,
		env: []string{"TRAINYARD_TOKEN_FILE=" + filepath.Join(dir, "config", "token")},
		args: append([]string{"server", "--address", fmt.Sprintf("127.0.0.1:%d", port),
			"--state-dir", filepath.Join(dir, "state"), "--storage-path", filepath.Join(dir, "runs")}, flags...)}
	s.start(t)
	// A server the test left running holds the test's files and locks: kill the one running
	// when the test that made it ends (not when a subtest that restarted it does).
	t.Cleanup(func() {
		if s.cmd != nil && s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// start starts the server process (again) and waits until it answers /healthz.
func (s *jobServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(binary, s.args...)
	s.cmd.Dir = s.dir
	s.cmd.Env = append(os.Environ(), s.env...)
	s.out = &lineBuffer{}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, s.addr, s.out)
}

// waitHealthy waits until the server at addr answers /healthz; out is its output, shown
// when it does not.
func waitHealthy(t *testing.T, addr string, out fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("the server did not answer /healthz within 30s:\n%s", out)
}

// cli runs a trainyard command against the server and returns its exit code and output.
func (s *jobServer) cli(t *testing.T, command string, args ...string) (int, string) {
	t.Helper()
	return run(t, s.dir, s.env, append([]string{command, "--address", s.addr}, args...)...)
}

// status returns a job's status, as `trainyard get -o json` says.
func (s *jobServer) status(t *testing.T, id string) string {
	t.Helper()
	code, out := s.cli(t, "get", id, "-o", "json")
	if code != 0 {
		t.Fatalf("get %s: exit %d\n%s", id, code, out)
	}
	var d struct {
		Job struct {
			Status string `json:"status"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("get %s -o json: %v\n%s", id, err, out)
	}
	return d.Job.Status
}

// waitStatus waits until the job is in one of the statuses and returns it.
func (s *jobServer) waitStatus(t *testing.T, id string, timeout time.Duration, statuses ...string) string {
	t.Helper()
	var st string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st = s.status(t, id); slices.Contains(statuses, st) {
			return st
		}
	}
	t.Fatalf("job %s is %s after %s, want %v; server output:\n%s", id, st, timeout, statuses, s.out)
	return ""
}

// submitNoWait submits a job with --no-wait and returns its ID.
func (s *jobServer) submitNoWait(t *testing.T, command ...string) string {
	t.Helper()
	code, out := s.cli(t, "submit", append([]string{"--no-wait", "--"}, command...)...)
	id := strings.TrimSpace(out)
	if code != 0 || strings.ContainsAny(id, " \n") {
		t.Fatalf("submit --no-wait: exit %d, want the job's ID alone:\n%s", code, out)
	}
	return id
}

// stopJobs stops every pending or running job, so that no sleep outlives the test.
func (s *jobServer) stopJobs(t *testing.T) {
	code, out := s.cli(t, "list", "--status", "pending,running", "-o", "json")
	var jobs []struct {
		ID string `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil {
		return
	}
	for _, j := range jobs {
		s.cli(t, "stop", j.ID)
	}
}

// The job server as its users drive it, through the CLI: submit and wait, submit and
// go, list, stop, get, delete, logs, the token, and jobs that outlive a killed server.
func TestServer(t *testing.T) {
	s := newJobServer(t, t.TempDir())
	t.Cleanup(func() {
		s.stopJobs(t)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})

	code, out := s.cli(t, "submit", "--", "sh", "-c", "echo hello")
	if code != 0 || !strings.Contains(out, "hello") || !strings.Contains(out, "succeeded") {
		t.Fatalf("submit: exit %d, want 0 and the job's hello:\n%s", code, out)
	}
	m := regexp.MustCompile(`submitted job (\S+);`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("submit did not print the job's ID:\n%s", out)
	}
	hello := m[1]

	t.Run("list, stop", func(t *testing.T) {
		id := s.submitNoWait(t, "sleep", "300")
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s+-\s+RUNNING\s`)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			code, out := s.cli(t, "list")
			if code == 0 && row.MatchString(out) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("list does not show %s RUNNING within 30s: exit %d\n%s", id, code, out)
			}
		}
		if code, out := s.cli(t, "stop", id); code != 0 || !strings.Contains(out, id) {
			t.Fatalf("stop: exit %d\n%s", code, out)
		}
		s.waitStatus(t, id, 30*time.Second, "STOPPED")
	})

	t.Run("submit --working-dir uploads the folder", func(t *testing.T) {
		dir := t.TempDir()
		for name, content := range map[string]string{"run.sh": "cat data/note.txt\n", "data/note.txt": "note from the uploaded folder\n"} {
			path := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, out := s.cli(t, "submit", "--working-dir", dir, "--", "sh", "run.sh")
		if code != 0 || !strings.Contains(out, "note from the uploaded folder") {
			t.Fatalf("submit --working-dir: exit %d, want 0 and the file's content:\n%s", code, out)
		}
	})

	t.Run("get shows the attempt", func(t *testing.T) {
		code, out := s.cli(t, "get", hello)
		for _, want := range []string{"Status:       SUCCEEDED", "Command:      sh -c 'echo hello'", "Attempt 1: succeeded", "exited 0"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("get: exit %d, output lacks %q:\n%s", code, want, out)
			}
		}
	})

	t.Run("stop of an ended job says so", func(t *testing.T) {
		code, out := s.cli(t, "stop", hello)
		if want := "Job " + hello + " had already ended (SUCCEEDED); nothing to stop."; code != 0 || !strings.Contains(out, want) {
			t.Errorf("stop of a succeeded job: exit %d, want 0 and %q:\n%s", code, want, out)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if code, out := s.cli(t, "delete", hello); code != 0 {
			t.Fatalf("delete: exit %d\n%s", code, out)
		}
		code, out := s.cli(t, "get", hello)
		if code != 1 || !strings.Contains(out, "trainyard: no job with id or name '"+hello+"'") {
			t.Errorf("get of a deleted job: exit %d, want 1 and one line saying it is not found:\n%s", code, out)
		}
	})

	t.Run("a job by its name", func(t *testing.T) {
		code, out := s.cli(t, "submit", "--no-wait", "--name", "by-name", "--", "sh", "-c", "echo named; exec sleep 300")
		id := strings.TrimSpace(out)
		if code != 0 {
			t.Fatalf("submit --name by-name: exit %d\n%s", code, out)
		}
		if code, out := s.cli(t, "submit", "--no-wait", "--name", "by-name", "--", "true"); code != 1 ||
			!strings.Contains(out, "a job named 'by-name' exists already ("+id+")") {
			t.Errorf("a second job named by-name: exit %d, want 1 and the ID of the first:\n%s", code, out)
		}
		s.waitStatus(t, "by-name", 30*time.Second, "RUNNING")
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if code, out := s.cli(t, "logs", "by-name"); code == 0 && strings.Contains(out, "named") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("logs by-name does not print the job's line within 30s")
			}
		}
		if code, out := s.cli(t, "stop", "by-name"); code != 0 || !strings.Contains(out, id) {
			t.Fatalf("stop by-name: exit %d\n%s", code, out)
		}
		s.waitStatus(t, id, 30*time.Second, "STOPPED")
		if code, out := s.cli(t, "delete", "by-name"); code != 0 {
			t.Fatalf("delete by-name: exit %d\n%s", code, out)
		}
		if code, out := s.cli(t, "get", "by-name"); code != 1 || !strings.Contains(out, "no job with id or name 'by-name'") {
			t.Errorf("get of a deleted name: exit %d\n%s", code, out)
		}
	})

	t.Run("no token, no answer", func(t *testing.T) {
		resp, err := http.Get(s.addr + "/api/v1/jobs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /api/v1/jobs without the token: %s, want 401", resp.Status)
		}
	})

	t.Run("top node", func(t *testing.T) {
		code, out := s.cli(t, "top", "node")
		if code != 0 || !strings.Contains(out, "RESOURCE") || !strings.Contains(out, "GPU") {
			t.Errorf("top node: exit %d\n%s", code, out)
		}
	})

	t.Run("jobs outlive a killed server", func(t *testing.T) {
		id := s.submitNoWait(t, "sh", "-c", "sleep 3; echo done")
		s.waitStatus(t, id, 30*time.Second, "RUNNING")
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = s.cmd.Wait()
		s.start(t)
		if st := s.waitStatus(t, id, 60*time.Second, "SUCCEEDED", "FAILED", "STOPPED"); st != "SUCCEEDED" {
			t.Fatalf("the job is %s after the server was killed and started again, want SUCCEEDED", st)
		}
		if code, out := s.cli(t, "logs", id); code != 0 || !strings.Contains(out, "done") {
			t.Errorf("logs: exit %d, want the job's done:\n%s", code, out)
		}
	})

	t.Run("SIGTERM stops the server", func(t *testing.T) {
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the server exited with %v after SIGTERM, want 0:\n%s", err, s.out)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the server did not stop within 20s of SIGTERM:\n%s", s.out)
		}
	})
}
