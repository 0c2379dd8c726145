package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/bench/internal/seed"
	"github.com/trainyard/trainyard/client"
)

// memoryResult is what the memory trial measured.
type memoryResult struct {
	finished, queued int
	seed             time.Duration // writing the finished jobs into the state file
	seededBytes      int64         // the state file's size after that
	stateBytes       int64         // the state file's size at the end
	points           []memPoint
	requests         []requestTiming
}

// memPoint is the server's memory at one point of the trial.
type memPoint struct {
	what string
	mem  host.Memory
}

// requestTiming is one GET of the trial: its answer's size and how long it took.
type requestTiming struct {
	path  string
	bytes int64
	took  time.Duration
}

// measureMemory writes cfg.finished finished jobs into a state file, starts a server on
// it, queues cfg.queued jobs behind a blocker over HTTP, lists every job, scrapes
// /metrics three times, and reads the server's memory along the way.
func measureMemory(ctx context.Context, cfg *config) (res memoryResult, err error) {
	dir := filepath.Join(cfg.root, "memory")
	stateFile := filepath.Join(dir, "state", "jobs.db")
	res.finished, res.queued = cfg.finished, cfg.queued
	start := time.Now()
	if err := seed.FinishedJobs(stateFile, dir, cfg.finished, nil); err != nil {
		return res, err
	}
	res.seed = time.Since(start)
	if res.seededBytes, err = fileSize(stateFile); err != nil {
		return res, err
	}
	s, err := startServer(ctx, cfg, dir)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	if err := res.mark(s, fmt.Sprintf("started on the state file with %d finished jobs", cfg.finished)); err != nil {
		return res, err
	}
	if err := queueBehindBlocker(ctx, s, cfg); err != nil {
		return res, err
	}
	if err := res.mark(s, fmt.Sprintf("+ a blocker and %d queued jobs, each with its waiting reason", cfg.queued)); err != nil {
		return res, err
	}
	if err := res.scrape(ctx, s); err != nil {
		return res, err
	}
	if err := res.mark(s, "after GET /api/jobs/, GET /api/v1/jobs and 3 GET /metrics"); err != nil {
		return res, err
	}
	res.stateBytes, err = fileSize(stateFile)
	return res, err
}

// queueBehindBlocker submits a blocker, then cfg.queued jobs from cfg.clients clients,
// and waits (30 seconds at most) until each has its waiting reason.
func queueBehindBlocker(ctx context.Context, s *serverProc, cfg *config) error {
	if _, err := submitBlocker(ctx, s.client); err != nil {
		return err
	}
	if _, _, err := submitQueued(ctx, s.client, cfg.queued, cfg.clients); err != nil {
		return fmt.Errorf("%w (server log %s)", err, s.logPath)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		pending, err := s.client.List(ctx, client.StatusPending)
		if err != nil {
			return err
		}
		waiting := 0
		for _, j := range pending {
			if j.Message != "" {
				waiting++
			}
		}
		if len(pending) == cfg.queued && waiting == cfg.queued {
			return nil
		}
	}
	return fmt.Errorf("the %d queued jobs are not all pending with a waiting reason after 30s", cfg.queued)
}

// scrape lists every job through Ray's API and the native one, and scrapes /metrics
// three times.
func (r *memoryResult) scrape(ctx context.Context, s *serverProc) error {
	for _, path := range []string{"/api/jobs/", "/api/v1/jobs", "/metrics", "/metrics", "/metrics"} {
		n, took, err := s.getRaw(ctx, path)
		if err != nil {
			return err
		}
		r.requests = append(r.requests, requestTiming{path: path, bytes: n, took: took})
	}
	return nil
}

// mark reads the server's memory now.
func (r *memoryResult) mark(s *serverProc, what string) error {
	m, err := s.memory()
	if err != nil {
		return err
	}
	r.points = append(r.points, memPoint{what: what, mem: m})
	return nil
}

// fileSize returns the size of the file at path.
func fileSize(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
