package podworker

import (
	"context"
	"sync/atomic"
)

// preemption carries the pod's stop signal (Options.Preempt) to the worker's launcher, so
// that the ranks get the preemption notice and time to save (launcher.Launcher.Preempt),
// and ends the worker once they are stopped: the member then leaves the gang (a
// disruption, not a failure that would restart it in place). With no attempt running the
// worker ends at once.
type preemption struct {
	relay     chan string        // the launcher's Preempt
	stop      context.CancelFunc // ends the worker
	running   atomic.Bool        // an attempt's ranks run
	signalled atomic.Bool        // the stop signal came
}

func newPreemption(stop context.CancelFunc) *preemption {
	return &preemption{relay: make(chan string, 1), stop: stop}
}

// follow waits for the stop signal and passes it on.
func (p *preemption) follow(ctx context.Context, signal <-chan string) {
	select {
	case why := <-signal:
		p.signalled.Store(true)
		p.relay <- why
		if !p.running.Load() {
			p.stop()
		}
	case <-ctx.Done():
	}
}

// attempt runs one attempt of the worker's ranks, and ends the worker when a preemption
// stopped them, or when the signal came while the attempt ended for another reason (the
// coordinator stopped it): its launcher no longer read the relay then, and the worker
// would otherwise wait for the next attempt, which may never start (a worker it waits for
// is gone). follow sets signalled before it reads running, and this clears running before
// it reads signalled, so one of them ends the worker.
func (p *preemption) attempt(run func() (preempted bool)) {
	p.running.Store(true)
	preempted := run()
	p.running.Store(false)
	if preempted || p.signalled.Load() {
		p.stop()
	}
}
