package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/ganglease"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// leases are the gang leases that processes of running jobs wait on or hold through the
// lease socket (see package ganglease): one at a time per job, keyed by job ID.
type leases struct {
	mu      sync.Mutex
	waiters map[string]*leaseWaiter
}

// leaseWaiter is a connection that asked for a job's gang and is still open.
type leaseWaiter struct {
	since  time.Time       // the RequestedAt of the job's Gang record it waits on
	events chan leaseEvent // what reconcile decided; the newest replaces an unread one
}

// leaseEvent is a scheduling decision for a lease: a reason it waits, or its GPUs.
type leaseEvent struct {
	waiting string
	gpus    [][]int
}

// send hands ev to the waiter, replacing an event it has not read yet.
func (w *leaseWaiter) send(ev leaseEvent) {
	for {
		select {
		case w.events <- ev:
			return
		default:
		}
		select {
		case <-w.events:
		default:
		}
	}
}

// waiter returns the open connection waiting on the job's lease, if any.
func (l *leases) waiter(id string) *leaseWaiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiters[id]
}

// gangName is the scheduler's name for a job's gang: its queue entries must differ from
// jobs' IDs, and the name may appear in another job's waiting reason.
func gangName(id string) string { return id + "'s gang" }

// gangJob is what the scheduler needs to know of a job's gang lease.
func gangJob(j *store.Job) scheduler.Job {
	g := j.Gang
	return scheduler.Job{ID: gangName(j.ID), Name: gangName(cmp.Or(j.Name, j.ID)), Priority: j.Priority, Seq: j.Seq, Workers: g.Workers,
		PerWorker: scheduler.Resources{GPUs: g.GPUsPerWorker, MilliCPU: g.MilliCPUPerWorker, MemoryBytes: g.MemoryBytesPerWorker}}
}

// gangRequest is the request a job's gang lease was made with, without its job and secret.
func gangRequest(g *store.Gang) ganglease.Request {
	return ganglease.Request{Workers: g.Workers, GPUsPerWorker: g.GPUsPerWorker,
		MilliCPUPerWorker: g.MilliCPUPerWorker, MemoryBytesPerWorker: g.MemoryBytesPerWorker}
}

// gangWaits is the job's message while its gang's lease waits.
func gangWaits(g *store.Gang, why string) string {
	return fmt.Sprintf("its gang (%s) waits: %s", gangRequest(g), why)
}

// serveLeases serves GPU leases to the processes of running jobs on a Unix socket at
// path (made 0600; the server's state folder is 0700) until ctx ends or stop is called.
// Leases held when it stops stay held in the store: their gangs keep running.
func (s *Service) serveLeases(ctx context.Context, path string) (stop func(), err error) {
	_ = os.Remove(path) // a socket left by an earlier server (the state folder's lock is ours)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen for GPU leases: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen for GPU leases: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ganglease.Path, func(w http.ResponseWriter, r *http.Request) { s.serveLease(ctx, w, r) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve GPU leases", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return func() { cancel(); <-done }, nil
}

// serveLease answers one lease request: it records the job's Gang, streams why it waits
// until reconcile grants its GPUs, sends them, and holds them until the connection (or
// the server) closes.
func (s *Service) serveLease(serving context.Context, w http.ResponseWriter, r *http.Request) {
	var req ganglease.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, ganglease.MaxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "decode the lease request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := req.Check(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !ganglease.Valid(s.cfg.LeaseKey, req.Job, req.Secret) {
		http.Error(w, "the secret does not match the job: lease a gang from inside the job, with the environment its server gave it", http.StatusForbidden)
		return
	}
	lease := &store.Gang{Workers: req.Workers, GPUsPerWorker: req.GPUsPerWorker, MilliCPUPerWorker: req.MilliCPUPerWorker,
		MemoryBytesPerWorker: req.MemoryBytesPerWorker, RequestedAt: time.Now()}
	if err := scheduler.CheckFits(s.cfg.Node, gangJob(&store.Job{Gang: lease})); err != nil {
		http.Error(w, fmt.Sprintf("the gang (%s) can never run on this server: %v", gangRequest(lease), err), http.StatusUnprocessableEntity)
		return
	}
	waiter, err := s.openLease(req.Job, lease)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	defer func() {
		if serving.Err() != nil { // the server stops: the gang keeps its GPUs
			s.dropWaiter(req.Job, waiter)
			return
		}
		s.closeLease(req.Job, waiter)
	}()
	s.log.Info("a job asks for a gang", "job", req.Job, "gang", gangRequest(lease).String())
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	s.poke()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-serving.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	streamLease(ctx, w, waiter)
}

// streamLease writes the waiter's events until its GPUs are sent, then waits for the
// connection to close.
func streamLease(ctx context.Context, w http.ResponseWriter, waiter *leaseWaiter) {
	enc := json.NewEncoder(w)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-waiter.events:
			if ev.gpus != nil {
				_ = enc.Encode(ganglease.Event{GPUs: ev.gpus})
				flush()
				<-ctx.Done()
				return
			}
			_ = enc.Encode(ganglease.Event{Waiting: ev.waiting})
			flush()
		}
	}
}

// openLease registers a waiter for the job's lease and records the lease in the job,
// replacing one its process held before (a process asks again only when its earlier
// gang has ended) unless a connection still holds that one open.
func (s *Service) openLease(id string, lease *store.Gang) (*leaseWaiter, error) {
	waiter := &leaseWaiter{since: lease.RequestedAt, events: make(chan leaseEvent, 1)}
	s.leases.mu.Lock()
	if s.leases.waiters[id] != nil {
		s.leases.mu.Unlock()
		return nil, fmt.Errorf("job %s already holds or awaits a gang; a job leases one gang at a time", id)
	}
	s.leases.waiters[id] = waiter
	s.leases.mu.Unlock()
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status != store.Running || j.StopRequested {
			return fmt.Errorf("job %s is %s; only a running job leases a gang", id, j.Status)
		}
		j.Gang, j.Message = lease, gangWaits(lease, "not scheduled yet")
		return nil
	})
	if err != nil {
		s.dropWaiter(id, waiter)
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("job %s does not exist", id)
		}
		return nil, err
	}
	return waiter, nil
}

// closeLease frees the job's lease when its connection closes: the record first, so
// that reconcile never grants GPUs to a lease that nobody waits on.
func (s *Service) closeLease(id string, waiter *leaseWaiter) {
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Gang != nil && j.Gang.RequestedAt.Equal(waiter.since) {
			if j.Gang.GPUs == nil && j.Status == store.Running {
				j.Message = ""
			}
			j.Gang = nil
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("free a gang's resources", "job", id, "err", err)
	}
	s.dropWaiter(id, waiter)
	s.log.Info("a job's gang gave its resources back", "job", id)
	s.poke()
}

func (s *Service) dropWaiter(id string, waiter *leaseWaiter) {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.waiters[id] == waiter {
		delete(s.leases.waiters, id)
	}
}

// grantLease records the GPUs of a job's gang (empty lists for a gang on CPUs), then
// hands them to its waiter; waiting is the job as reconcile read it: the GPUs are for its
// lease, not for a later one.
func (s *Service) grantLease(waiting *store.Job, gpus [][]int) {
	id := waiting.ID
	for len(gpus) < waiting.Gang.Workers { // a grant is never nil: nil is a lease that waits
		gpus = append(gpus, []int{})
	}
	waiter := s.leases.waiter(id)
	if waiter == nil || !waiting.Gang.RequestedAt.Equal(waiter.since) {
		return
	}
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status != store.Running || j.Gang == nil || j.Gang.GPUs != nil || !j.Gang.RequestedAt.Equal(waiter.since) {
			return errNotPending
		}
		j.Gang.GPUs, j.Message = gpus, ""
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNotPending) {
			s.log.Error("record a gang's GPUs", "job", id, "err", err)
		}
		return
	}
	s.log.Info("granted a job's gang", "job", id, "gpus", gpus)
	waiter.send(leaseEvent{gpus: gpus})
}

// leaseWaits records why a job's gang waits and tells its waiter.
func (s *Service) leaseWaits(j *store.Job, why string) {
	if msg := gangWaits(j.Gang, why); msg != j.Message {
		s.setRunningMessage(j.ID, msg)
	}
	if waiter := s.leases.waiter(j.ID); waiter != nil {
		waiter.send(leaseEvent{waiting: why})
	}
}

// dropStaleLease forgets a waiting lease whose connection is gone (one recorded before
// this server started), as stale read it: not one asked for since.
func (s *Service) dropStaleLease(stale *store.Job) {
	_, err := s.cfg.Store.Update(stale.ID, func(j *store.Job) error {
		if j.Gang != nil && j.Gang.GPUs == nil && j.Gang.RequestedAt.Equal(stale.Gang.RequestedAt) {
			j.Gang, j.Message = nil, ""
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("forget a gang's lease", "job", stale.ID, "err", err)
	}
}

func (s *Service) setRunningMessage(id, msg string) {
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status == store.Running {
			j.Message = msg
		}
		return nil
	})
	if err != nil {
		s.log.Warn("record why a gang waits", "job", id, "err", err)
	}
}
