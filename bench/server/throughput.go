package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/bench/internal/seed"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/store"
)

// rate is n operations done by some workers at once: the wall time of all of them and
// the time each took.
type rate struct {
	n, workers int
	wall       time.Duration
	each       []time.Duration
}

// perSecond is the operations done per second of wall time.
func (r rate) perSecond() float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(r.n) / r.wall.Seconds()
}

// hammer calls op(0) to op(n-1) from workers goroutines at once, each taking the next
// index, and stops at the first error.
func hammer(n, workers int, op func(i int) error) (rate, error) {
	r := rate{n: n, workers: workers, each: make([]time.Duration, n)}
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && !failed.Load(); i = int(next.Add(1) - 1) {
				t := time.Now()
				if errs[w] = op(i); errs[w] != nil {
					failed.Store(true)
					return
				}
				r.each[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	return r, errors.Join(errs...)
}

// submitQueued submits n jobs of `sh -c true` with 1 CPU each from workers clients at
// once, and returns their IDs; every submission must be accepted.
func submitQueued(ctx context.Context, c *client.Client, n, workers int) (rate, []string, error) {
	ids := make([]string, n)
	r, err := hammer(n, workers, func(i int) error {
		j, err := c.Submit(ctx, client.SubmitRequest{Job: seed.ShellJob(1, "sh", "-c", "true")})
		ids[i] = j.ID
		return err
	})
	if err != nil {
		return r, nil, err
	}
	seen := make(map[string]bool, n)
	for _, id := range ids {
		if seen[id] {
			return r, nil, fmt.Errorf("two submissions got the ID %s", id)
		}
		seen[id] = true
	}
	return r, ids, nil
}

// measureSubmissions submits cfg.submissions jobs from cfg.clients clients to a server
// of its own while a blocker holds every CPU, so that they all queue; then it stops them
// all and times that too.
func measureSubmissions(ctx context.Context, cfg *config) (submit, drain rate, err error) {
	s, err := startServer(ctx, cfg, filepath.Join(cfg.root, "submissions"))
	if err != nil {
		return submit, drain, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	if _, err = submitBlocker(ctx, s.client); err != nil {
		return submit, drain, err
	}
	if submit, _, err = submitQueued(ctx, s.client, cfg.submissions, cfg.clients); err != nil {
		return submit, drain, fmt.Errorf("%w (server log %s)", err, s.logPath)
	}
	start := time.Now()
	sent, err := drainJobs(ctx, s.client)
	drain = rate{n: sent, workers: 8, wall: time.Since(start)}
	return submit, drain, err
}

// measureStoreCreates creates cfg.submissions pending records, as the server makes them
// for the same jobs, in a store of its own from cfg.clients goroutines at once. The
// records are made before the clock starts.
func measureStoreCreates(cfg *config) (rate, error) {
	dir := filepath.Join(cfg.root, "store")
	st, err := store.Open(filepath.Join(dir, "jobs.db"), store.Options{})
	if err != nil {
		return rate{}, err
	}
	defer st.Close()
	recs := make([]*store.Job, cfg.submissions)
	for i := range recs {
		if recs[i], err = seed.Pending(dir, time.Now(), "sh", "-c", "true"); err != nil {
			return rate{}, err
		}
	}
	return hammer(len(recs), cfg.clients, func(i int) error { return st.Create(recs[i]) })
}
