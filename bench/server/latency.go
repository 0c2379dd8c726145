package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/trainyard/trainyard/bench/internal/seed"
	"github.com/trainyard/trainyard/client"
)

// latencyTrial is one submission of `sleep 1` to an idle server, and one start of
// `trainyard run -- sleep 1` by hand right after it.
type latencyTrial struct {
	recorded  time.Duration // StartedAt - SubmittedAt in the job's record
	running   time.Duration // Submit called to the first GET that shows RUNNING
	firstLine time.Duration // Submit called to the first line in the job's console log
	yardstick time.Duration // `trainyard run` started to its first output line
}

// measureLatency runs cfg.runs trials on a server of its own, which is idle but for
// them.
func measureLatency(ctx context.Context, cfg *config) (_ []latencyTrial, err error) {
	dir := filepath.Join(cfg.root, "latency")
	s, err := startServer(ctx, cfg, dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	out := make([]latencyTrial, 0, cfg.runs)
	for i := range cfg.runs {
		tr, err := serverTrial(ctx, cfg, s.client)
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w (server log %s)", i+1, err, s.logPath)
		}
		if tr.yardstick, err = yardstickTrial(ctx, cfg, filepath.Join(dir, "by-hand")); err != nil {
			return nil, fmt.Errorf("trial %d: trainyard run: %w", i+1, err)
		}
		out = append(out, tr)
	}
	return out, nil
}

// serverTrial submits `sleep 1`, polls it every cfg.poll until it runs and its
// supervisor has printed a line, then every 50 ms until it ends, which must be
// SUCCEEDED. Each wait is bounded to 30 seconds.
func serverTrial(ctx context.Context, cfg *config, c *client.Client) (latencyTrial, error) {
	var tr latencyTrial
	start := time.Now()
	j, err := c.Submit(ctx, client.SubmitRequest{Job: seed.ShellJob(0, "sleep", "1")})
	if err != nil {
		return tr, err
	}
	console := filepath.Join(j.RunDir, "console.log")
	deadline := start.Add(30 * time.Second)
	for tr.running == 0 || tr.firstLine == 0 {
		if time.Now().After(deadline) {
			return tr, fmt.Errorf("job %s: not running with a console line after 30s", j.ID)
		}
		if tr.running == 0 {
			if tr.running, tr.recorded, err = pollRunning(ctx, c, j.ID, start); err != nil {
				return tr, err
			}
		}
		if tr.firstLine == 0 && hasLine(console) {
			tr.firstLine = time.Since(start)
		}
		time.Sleep(cfg.poll)
	}
	return tr, waitEnded(ctx, c, j.ID)
}

// pollRunning reads the job once: once it has left PENDING it returns the time since
// start and StartedAt - SubmittedAt, else zeros.
func pollRunning(ctx context.Context, c *client.Client, id string, start time.Time) (seen, recorded time.Duration, err error) {
	d, err := c.Get(ctx, id)
	switch {
	case err != nil:
		return 0, 0, err
	case d.Job.Status == client.StatusPending:
		return 0, 0, nil
	case d.Job.StartedAt == nil:
		return 0, 0, fmt.Errorf("job %s is %s without a start time: %s", id, d.Job.Status, d.Job.Message)
	}
	return time.Since(start), d.Job.StartedAt.Sub(d.Job.SubmittedAt), nil
}

// hasLine reports whether the file holds a whole line.
func hasLine(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && bytes.IndexByte(data, '\n') >= 0
}

// waitEnded polls the job every 50 ms, for 30 seconds at most, until it ends; it must
// have succeeded.
func waitEnded(ctx context.Context, c *client.Client, id string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		d, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		if client.Ended(d.Job.Status) && d.Job.Status != client.StatusSucceeded {
			return fmt.Errorf("job %s is %s: %s", id, d.Job.Status, d.Job.Message)
		}
		if client.Ended(d.Job.Status) {
			return nil
		}
	}
	return fmt.Errorf("job %s did not end within 30s", id)
}

// yardstickTrial starts `trainyard run -- sleep 1` with its runs under dir and returns
// the time from the start until it printed its first line (stdout and stderr together);
// it then waits, 30 seconds at most, for it to exit 0.
func yardstickTrial(ctx context.Context, cfg *config, dir string) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd := exec.CommandContext(ctx, cfg.binary, "run", "--storage-path", dir, "--", "sleep", "1")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, w, w
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	start := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, err
	}
	lines := bufio.NewScanner(r)
	first := time.Duration(0)
	for lines.Scan() {
		if first == 0 {
			first = time.Since(start)
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, err
	}
	if first == 0 {
		return 0, fmt.Errorf("no output")
	}
	return first, nil
}
