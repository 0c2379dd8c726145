package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/bench/internal/seed"
	"github.com/trainyard/trainyard/client"
)

// serverProc is a `trainyard server` the benchmark started, on a free loopback port,
// with its state folder, storage path, token file and log under one folder.
type serverProc struct {
	cmd      *exec.Cmd
	addr     string // http://127.0.0.1:<port>
	token    string
	stateDir string
	logPath  string
	http     *http.Client
	client   *client.Client
}

// startServer starts a server with its files under dir (dir/state unless it exists
// already, dir/runs, dir/token, dir/server.log) and waits until it answers /healthz.
func startServer(ctx context.Context, cfg *config, dir string) (*serverProc, error) {
	port, err := host.FreePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &serverProc{addr: fmt.Sprintf("http://127.0.0.1:%d", port), stateDir: filepath.Join(dir, "state"),
		logPath: filepath.Join(dir, "server.log")}
	log, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	tokenFile := filepath.Join(dir, "token")
	s.cmd = exec.Command(cfg.binary, "server", "--address", fmt.Sprintf("127.0.0.1:%d", port),
		"--state-dir", s.stateDir, "--storage-path", filepath.Join(dir, "runs"), "--token-file", tokenFile)
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = dir, log, log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	if err := s.waitHealthy(ctx); err != nil {
		s.kill()
		return nil, err
	}
	if s.token, err = client.ResolveToken(tokenFile); err != nil {
		s.kill()
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(cfg.clients, 2)
	s.http = &http.Client{Transport: tr, Timeout: time.Minute}
	s.client = client.New(s.addr, s.token, client.WithHTTPClient(s.http))
	return s, nil
}

// waitHealthy waits up to 30 seconds until the server answers /healthz.
func (s *serverProc) waitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		resp, err := hc.Get(s.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("the server did not answer /healthz within 30s; see %s", s.logPath)
}

// close stops every job the server holds, the blockers' supervisors included, then the
// server itself.
func (s *serverProc) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := drainJobs(ctx, s.client)
	s.http.CloseIdleConnections()
	if serr := s.stop(); err == nil {
		err = serr
	}
	return err
}

// stop sends SIGTERM to the server and waits up to 20 seconds for it to exit, then kills
// it.
func (s *serverProc) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		return fmt.Errorf("the server did not stop within 20s of SIGTERM; see %s", s.logPath)
	}
}

// kill kills the server and reaps it.
func (s *serverProc) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// memory reads the server process's VmRSS and VmHWM.
func (s *serverProc) memory() (host.Memory, error) { return host.ReadMemory(s.cmd.Process.Pid) }

// getRaw sends GET path with the token and returns the answer's size and the time until
// it was read whole.
func (s *serverProc) getRaw(ctx context.Context, path string) (int64, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.addr+path, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
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
	return n, took, err
}

// submitBlocker submits a job that holds every CPU of the machine for 300 seconds and
// waits until it runs, so that no job submitted after it can start.
func submitBlocker(ctx context.Context, c *client.Client) (string, error) {
	j, err := c.Submit(ctx, client.SubmitRequest{Job: seed.ShellJob(runtime.NumCPU(), "sleep", "300")})
	if err != nil {
		return "", fmt.Errorf("submit the blocker: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); j.Status != client.StatusRunning; time.Sleep(20 * time.Millisecond) {
		d, err := c.Get(ctx, j.ID)
		switch {
		case err != nil:
			return "", fmt.Errorf("follow the blocker %s: %w", j.ID, err)
		case client.Ended(d.Job.Status):
			return "", fmt.Errorf("the blocker %s ended: %s %s", j.ID, d.Job.Status, d.Job.Message)
		case time.Now().After(deadline):
			return "", fmt.Errorf("the blocker %s is not running after 30s", j.ID)
		}
		j = d.Job
	}
	return j.ID, nil
}

// drainJobs stops every pending job, then every running one, and waits until no job is
// pending or running; pending jobs go first so that none starts when a blocker ends. It
// returns how many stop requests it sent.
func drainJobs(ctx context.Context, c *client.Client) (int, error) {
	sent := 0
	for ; ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		pending, err := c.List(ctx, client.StatusPending)
		if err != nil {
			return sent, fmt.Errorf("list pending jobs: %w", err)
		}
		sent += stopAll(ctx, c, pending)
		running, err := c.List(ctx, client.StatusRunning)
		if err != nil {
			return sent, fmt.Errorf("list running jobs: %w", err)
		}
		if len(pending) == 0 && len(running) == 0 {
			return sent, nil
		}
		sent += stopAll(ctx, c, running)
	}
	return sent, errors.Join(errors.New("jobs still pending or running"), ctx.Err())
}

// stopAll asks the server to stop the jobs, from 8 goroutines, and returns how many
// requests it sent. A job that ended meanwhile is refused, which is fine: drainJobs
// lists the jobs again.
func stopAll(ctx context.Context, c *client.Client, jobs []client.Job) int {
	const stoppers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for g := range stoppers {
		wg.Go(func() {
			for i := g; i < len(jobs); i += stoppers {
				if jobs[i].StopRequested {
					continue
				}
				_, _ = c.Stop(ctx, jobs[i].ID)
				mu.Lock()
				sent++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sent
}
