package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/seed"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/store"
)

// seedState writes cfg.jobs finished jobs into dir/state/jobs.db, the newest of which
// (the big job) has a console log of cfg.logLines lines and cfg.points results, and
// returns the big job's ID.
func seedState(dir string, cfg config) (string, error) {
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", err
	}
	var big string
	err := seed.FinishedJobs(filepath.Join(state, "jobs.db"), dir, cfg.jobs, func(i int, j *store.Job) error {
		if i != cfg.jobs-1 {
			return nil
		}
		big = j.ID
		if err := writeLog(jobs.LogPath(j), cfg.logLines); err != nil {
			return err
		}
		return writeResults(filepath.Join(j.RunDir, reporting.ResultFile), cfg.points)
	})
	return big, err
}

// writeLog writes a console log of n training lines.
func writeLog(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		fmt.Fprintf(w, "[rank %d pid 4242] epoch %d step %d loss %.5f lr 0.00100\n", i%2, i/10000, i, 1/float64(i+1))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeResults writes n results of two metrics.
func writeResults(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	t0 := time.Now().Add(-time.Hour)
	for i := 1; i <= n; i++ {
		r := reporting.Result{Iteration: i, Timestamp: t0.Add(time.Duration(i) * 10 * time.Millisecond), Attempt: 1,
			TimeThisIterS: 0.01, TimeTotalS: float64(i) / 100, Metrics: map[string]float64{"loss": 1 / float64(i), "acc": float64(i) / float64(n)}}
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// serverProc is a running `trainyard server` with a signed-in session.
type serverProc struct {
	cmd    *exec.Cmd
	bin    string
	url    string
	token  string
	env    []string // the CLI's environment: this server's address and token file
	cookie *http.Cookie
	http   *http.Client
}

// cli runs the trainyard CLI against the server and returns its standard output.
func (s *serverProc) cli(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = s.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("trainyard %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// link returns a one-time sign-in link to the dashboard ('trainyard open --print').
func (s *serverProc) link(ctx context.Context) (string, error) {
	out, err := s.cli(ctx, "open", "--print")
	if err != nil {
		return "", err
	}
	link, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(link, s.url+"/login#code=") {
		return "", fmt.Errorf("trainyard open --print printed %q, not a sign-in link", out)
	}
	return link, nil
}

// signIn signs in to the dashboard with a one-time link and keeps the session cookie.
func (s *serverProc) signIn(ctx context.Context) error {
	link, err := s.link(ctx)
	if err != nil {
		return err
	}
	code := strings.TrimPrefix(link, s.url+"/login#code=")
	resp, err := s.http.PostForm(s.url+"/login", url.Values{"code": {code}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "trainyard_session") {
			s.cookie = c
		}
	}
	if s.cookie == nil {
		return fmt.Errorf("signing in to the dashboard set no session cookie (%s)", resp.Status)
	}
	return nil
}

// startServer starts a server on dir's state and signs in to its dashboard.
func startServer(ctx context.Context, bin, dir string) (*serverProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	tokenFile := filepath.Join(dir, "token")
	s := &serverProc{bin: bin, url: "http://" + addr, http: &http.Client{Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, kv := range os.Environ() { // the CLI must find this server and no other
		if !strings.HasPrefix(kv, "TRAINYARD_") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "TRAINYARD_TOKEN_FILE="+tokenFile, "TRAINYARD_ADDRESS="+s.url)
	s.cmd = exec.Command(bin, "server", "--address", addr, "--state-dir", filepath.Join(dir, "state"),
		"--storage-path", filepath.Join(dir, "runs"), "--token-file", tokenFile)
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = dir, logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("the server did not answer /healthz within a minute (see %s)", logFile.Name())
		}
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.token = strings.TrimSpace(string(tok))
	if err := s.signIn(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// get fetches path with the session cookie (or the token, for the API) and returns the
// time to the whole body and its size.
func (s *serverProc) get(path string, api bool) (time.Duration, int64, error) {
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		return 0, 0, err
	}
	if api {
		req.Header.Set("Authorization", "Bearer "+s.token)
	} else {
		req.AddCookie(s.cookie)
	}
	start := time.Now()
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	took := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return took, n, err
}

// stop stops the server.
func (s *serverProc) stop() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}
