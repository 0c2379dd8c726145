package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath returns the Chromium to drive: /usr/bin/chromium (Debian's package
// chromium), else chromium on PATH, else "".
func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	p, _ := exec.LookPath("chromium")
	return p
}

// poll calls check every 200ms until it reports done, and fails the test when timeout
// passes first, saying what it waited for and check's last error (which says why it
// was not done).
func poll(t *testing.T, timeout time.Duration, what string, check func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; last error: %v", timeout, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// server is a `trainyard server` that a test started, with its own token file, state
// folder and storage path, all in a temporary folder.
type server struct {
	bin   string   // the trainyard binary, for the CLI too
	url   string   // http://127.0.0.1:<port>
	token string   // the server's token, from its token file
	dir   string   // the temporary folder; CLI commands run in it
	env   []string // the CLI's environment: this server's address and token file
}

// job is a job as `trainyard list -o json` gives it.
type job struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

// startServer starts a server on a free loopback port, with env added to its
// environment, and waits until /healthz answers. At the test's end it stops the
// server's jobs (they outlive the server), then the server (SIGTERM), and logs the
// server's output if the test failed.
func startServer(t *testing.T, bin string, env ...string) *server {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	tokenFile := filepath.Join(dir, "token")
	s := &server{bin: bin, url: "http://" + addr, dir: dir}
	for _, kv := range os.Environ() { // the CLI must find this server and no other
		if !strings.HasPrefix(kv, "TRAINYARD_") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "TRAINYARD_TOKEN_FILE="+tokenFile, "TRAINYARD_ADDRESS="+s.url)

	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create the server's log: %v", err)
	}
	cmd := exec.Command(bin, "server", "--address", addr, "--token-file", tokenFile,
		"--state-dir", filepath.Join(dir, "state"), "--storage-path", filepath.Join(dir, "runs"), "--log-level", "info")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, append(slices.Clone(s.env), env...), logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start trainyard server: %v", err)
	}
	logFile.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		s.stopJobs(t)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("trainyard server exited after SIGTERM: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("trainyard server did not exit within 30s of SIGTERM; killed it")
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("trainyard server's output:\n%s", out)
		}
	})

	poll(t, 30*time.Second, "the server's /healthz", func() (bool, error) {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("trainyard server exited at start (%v):\n%s", err, out)
		default:
		}
		resp, err := http.Get(s.url + "/healthz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("/healthz: %s", resp.Status)
	})
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("read the server's token: %v", err)
	}
	s.token = strings.TrimSpace(string(tok))
	return s
}

// cli runs the trainyard CLI against the server and returns its stdout.
func (s *server) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir, cmd.Env = s.dir, s.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("trainyard %s: %w; stderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// submit submits a job of this name with --no-wait and returns its ID.
func (s *server) submit(t *testing.T, name string, command ...string) string {
	t.Helper()
	out, err := s.cli(append([]string{"submit", "--no-wait", "--name", name, "--"}, command...)...)
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return strings.TrimSpace(out)
}

// jobs lists the server's jobs with `trainyard list -o json`, by ID.
func (s *server) jobs() (map[string]job, error) {
	out, err := s.cli("list", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list []job
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("decode trainyard list -o json: %w; output: %s", err, out)
	}
	byID := map[string]job{}
	for _, j := range list {
		byID[j.ID] = j
	}
	return byID, nil
}

// waitStatus waits until the CLI lists job id with this status.
func (s *server) waitStatus(t *testing.T, id, status string) {
	t.Helper()
	poll(t, time.Minute, fmt.Sprintf("job %s to be %s", id, status), func() (bool, error) {
		jobs, err := s.jobs()
		if err != nil {
			return false, err
		}
		j, ok := jobs[id]
		if !ok {
			return false, fmt.Errorf("trainyard list has no job %s", id)
		}
		return j.Status == status, fmt.Errorf("job %s is %s", id, j.Status)
	})
}

// stopJobs stops the jobs that have not ended and waits (30s at most) until they
// have, so that none outlives the test.
func (s *server) stopJobs(t *testing.T) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		jobs, err := s.jobs()
		if err != nil {
			t.Errorf("list the jobs left at the end: %v", err)
			return
		}
		running := 0
		for id, j := range jobs {
			if j.Status == "RUNNING" || j.Status == "PENDING" {
				running++
				_, _ = s.cli("stop", id) // a job that is already stopping refuses; fine
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d jobs still run 30s after they were stopped", running)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// noRedirects is an HTTP client that returns redirects instead of following them.
var noRedirects = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// link returns a one-time sign-in link from 'trainyard open --print'.
func (s *server) link(t *testing.T) string {
	t.Helper()
	out, err := s.cli("open", "--print")
	if err != nil {
		t.Fatal(err)
	}
	link, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(link, s.url+"/login#code=") {
		t.Fatalf("trainyard open --print printed %q, want a link to %s/login#code=...", out, s.url)
	}
	return link
}

// signIn posts a sign-in link's code to /login, as a client that sends no Origin or
// Referer, and returns the response (its body closed) and the session cookie it sets.
func (s *server) signIn(code string) (*http.Response, *http.Cookie, error) {
	resp, err := noRedirects.PostForm(s.url+"/login", map[string][]string{"code": {code}, "next": {"/"}})
	if err != nil {
		return nil, nil, fmt.Errorf("POST /login: %w", err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "trainyard_session_") {
			return resp, c, nil
		}
	}
	return resp, nil, errors.New("POST /login set no trainyard_session_<port> cookie; Set-Cookie: " +
		strings.Join(resp.Header.Values("Set-Cookie"), " | "))
}

// signInWith opens a sign-in link in the browser and waits until its script has signed
// in and the page at want has loaded.
func signInWith(t *testing.T, ctx context.Context, link, want string) {
	t.Helper()
	do(t, ctx, "open the sign-in link", chromedp.Navigate(link))
	poll(t, 30*time.Second, "the sign-in link to lead to "+want, func() (bool, error) {
		// The address changes when the new page's navigation commits; its document is
		// ready a little later.
		at, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.href, document.readyState]`))
		if err != nil {
			return false, err
		}
		return at[0] == want && at[1] == "complete", fmt.Errorf("at %s (%s)", at[0], at[1])
	})
}
