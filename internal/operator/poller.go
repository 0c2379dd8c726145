package operator

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// pollQueue bounds the progress reads waiting for a poller worker; a request that finds it
// full is dropped, and the job's next reconcile asks again.
const pollQueue = 1024

// pollTimeout bounds one progress read.
const pollTimeout = 2 * time.Second

// poller reads running jobs' progress from their worker 0 outside Reconcile, so that pods
// that do not answer delay nothing but their own job's progress: Reconcile asks (want),
// a bounded pool of workers reads, keeps the newest summary per job and wakes the job's
// reconcile through events, which reads the summary (take).
type poller struct {
	read    func(ctx context.Context, url string) (*workload.Summary, error)
	workers int
	queue   chan pollRequest
	events  chan event.GenericEvent

	mu      sync.Mutex
	pending map[types.UID]bool
	latest  map[types.UID]*workload.Summary
	// since holds, per job, when what was read before it stopped counting (discard).
	since map[types.UID]time.Time
}

type pollRequest struct {
	uid types.UID
	key types.NamespacedName
	url string
}

// discard drops what was read of the job's progress so far, and what a read under way
// brings: the gang changed in a way that an older read does not show (growinplace.go).
func (p *poller) discard(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.latest, uid)
	p.since[uid] = time.Now()
}

func newPoller(read func(context.Context, string) (*workload.Summary, error), workers int) *poller {
	return &poller{
		read: read, workers: workers,
		queue:   make(chan pollRequest, pollQueue),
		events:  make(chan event.GenericEvent, pollQueue),
		pending: map[types.UID]bool{},
		latest:  map[types.UID]*workload.Summary{},
		since:   map[types.UID]time.Time{},
	}
}

// want asks for a read of the job's progress at url, unless one is under way; it never
// blocks.
func (p *poller) want(job *v1.TrainJob, url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending[job.UID] {
		return
	}
	select {
	case p.queue <- pollRequest{uid: job.UID, key: client.ObjectKeyFromObject(job), url: url}:
		p.pending[job.UID] = true
	default: // full: the next reconcile asks again
	}
}

// take returns the newest summary read for the job since the last take, or nil.
func (p *poller) take(uid types.UID) *workload.Summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.latest[uid]
	delete(p.latest, uid)
	return s
}

// forget drops what the poller holds for a job that is gone or finished.
func (p *poller) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.latest, uid)
	delete(p.since, uid)
}

// Start runs the workers until ctx ends (a manager.Runnable).
func (p *poller) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (p *poller) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-p.queue:
			p.poll(ctx, req)
		}
	}
}

func (p *poller) poll(ctx context.Context, req pollRequest) {
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, pollTimeout)
	sum, err := p.read(rctx, req.url)
	cancel()
	p.mu.Lock()
	delete(p.pending, req.uid)
	if since, ok := p.since[req.uid]; ok && began.Before(since) {
		sum = nil // read before the gang changed
	}
	if err == nil && sum != nil {
		p.latest[req.uid] = sum
	}
	p.mu.Unlock()
	if err != nil || sum == nil {
		return // an old image or a worker still starting: the status keeps what it had
	}
	job := &v1.TrainJob{}
	job.Name, job.Namespace = req.key.Name, req.key.Namespace
	select {
	case p.events <- event.GenericEvent{Object: job}:
	default: // full: the job's periodic reconcile reads the summary anyway
	}
}
