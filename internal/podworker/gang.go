package podworker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/gang"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/tcpstore"
	"github.com/trainyard/trainyard/internal/workload"
	"github.com/trainyard/trainyard/python"
)

// stopSlack is how much longer than the job's grace period the coordinator waits for a
// worker to confirm that its processes stopped (the launcher's SIGKILL and draining come
// after the grace period).
const stopSlack = 15 * time.Second

// coordinatorWait bounds the wait for worker 0's coordinator to end after the gang
// finished (it waits for the members to hang up).
const coordinatorWait = 15 * time.Second

// gangRun is what a worker keeps of the gang across its attempts.
type gangRun struct {
	extra  map[string]string // variables of every rank
	gpus   []device.GPU
	helper string // the Python helper's folder
	l      *launcher.Launcher
	// coord is worker 0's coordinator (nil elsewhere), set before the progress server
	// reads it.
	coord atomic.Pointer[gang.Coordinator]
	// fin is how the gang ended, once the coordinator said so.
	fin *gang.Finish

	mu       sync.Mutex
	prepared map[int]map[string]string // worker 0's attempt variables, made in Prepare
	// store is the gang's rendezvous store on worker 0 (see hostStore); nil elsewhere, or
	// when the job opts out.
	store *tcpstore.Server
	// warming is held while the launcher is made or warmed (waiting) and while an attempt
	// takes it; started is set once an attempt began on this pod.
	warming sync.Mutex
	started atomic.Bool
}

// final is the gang's Final, if it failed for good.
func (g *gangRun) final() string {
	if g.fin == nil || g.fin.Outcome == gang.Succeeded {
		return ""
	}
	return g.fin.Final
}

// failure is what the coordinator said of a gang that failed, or "".
func (g *gangRun) failure() string {
	if g.fin == nil || g.fin.Outcome == gang.Succeeded {
		return ""
	}
	return g.fin.Reason
}

// runGang runs the worker's member of the gang (and worker 0's coordinator) until the
// gang finishes, then takes how it ended as the worker's outcome.
func (w *worker) runGang(ctx context.Context) error {
	m := &gang.Member{Addr: w.cfg.gangAddr(), Worker: w.cfg.Worker, Pod: hostname(), Secret: w.cfg.GangSecret,
		ConnectWait: w.opts.PrimaryWait, Attempt: w.runAttempt, Waiting: func() { w.waiting(ctx) },
		Notify: w.console.Notice, Logger: w.opts.Logger}
	mctx := ctx
	var coordinated chan struct{} // closed when worker 0's coordinator returns
	if w.primary() {
		ln, err := w.listen()
		if err != nil {
			return err
		}
		if err := w.hostStore(); err != nil {
			ln.Close()
			return err
		}
		defer w.closeStore()
		m.Addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
		c := w.coordinator()
		w.gang.coord.Store(c)
		cctx, stop := context.WithCancel(ctx)
		var cancel context.CancelCauseFunc
		mctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		coordinated = make(chan struct{})
		go func() {
			defer close(coordinated)
			if _, err := c.Run(cctx, ln); err != nil && cctx.Err() == nil {
				cancel(fmt.Errorf("worker 0's coordinator: %w", err))
			}
		}()
		defer func() {
			// After the gang finished the coordinator waits for everyone to hang up;
			// otherwise (an error, or ctx's end) it is stopped at once.
			if w.gang.fin != nil {
				select {
				case <-coordinated:
				case <-time.After(coordinatorWait):
				}
			}
			stop()
			<-coordinated
		}()
	}
	fin, err := m.Run(mctx)
	if w.gang.l != nil {
		w.gang.l.DropSpares() // no attempt follows on this pod
	}
	if err != nil {
		if cause := context.Cause(mctx); ctx.Err() == nil && cause != nil {
			err = cause
		}
		if ctx.Err() != nil && w.res.Outcome != "" {
			w.res.Outcome = launcher.Interrupted // the pod was stopped, and with it the ranks
			return nil
		}
		return err
	}
	w.gang.fin = &fin
	w.cfg.Attempt = fin.Attempt
	w.res = launcher.AttemptResult{Outcome: launcher.Succeeded, FailedRank: -1, ExitCode: -1}
	if fin.Outcome != gang.Succeeded {
		w.res = launcher.AttemptResult{Outcome: launcher.Failed, Reason: fin.Reason, FailedRank: -1, ExitCode: -1}
	}
	return nil
}

// hostStore starts worker 0's rendezvous store (torch's TCPStore, package tcpstore) on
// the gang's rendezvous port, on every address, before any attempt: the ranks of every
// worker are its clients, as torchrun's agent hosts the store, so that no rank waits for
// rank 0's torch to host one (1-second connect retries, and rank 0 serving 31 ranks while
// it imports torch). It lives as long as the pod; prepareAttempt empties it between
// attempts, when every member has confirmed its processes gone. A job that opts out
// (launcher.AgentStoreWanted) keeps rank 0's store, as before.
func (w *worker) hostStore() error {
	if !launcher.AgentStoreWanted(w.job) {
		return nil
	}
	st, err := tcpstore.Listen(":"+strconv.Itoa(w.cfg.MasterPort), tcpstore.Options{Logger: w.opts.Logger})
	if err != nil {
		return fmt.Errorf("host the gang's rendezvous store (set %s=False in the job's env to let rank 0 host it): %w",
			launcher.AgentStoreEnv, err)
	}
	w.gang.store = st
	return nil
}

// closeStore stops worker 0's rendezvous store, if it hosts one.
func (w *worker) closeStore() {
	if w.gang.store != nil {
		w.gang.store.Close()
	}
}

// listen opens worker 0's gang port, on every address.
func (w *worker) listen() (net.Listener, error) {
	addr := w.cfg.gangAddr()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("the gang's address %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return nil, fmt.Errorf("listen for the gang's workers: %w", err)
	}
	return ln, nil
}

// coordinator is worker 0's coordinator of the gang. Its first attempt is the pod's, or
// the one after the last that run.json records (restarts in place that the operator did
// not see before it made these pods).
func (w *worker) coordinator() *gang.Coordinator {
	s := &w.job.Spec
	first := w.cfg.Attempt
	if rec := w.folder.Record(); len(rec.Attempts) > 0 {
		first = max(first, rec.Attempts[len(rec.Attempts)-1].Number+1)
	}
	return &gang.Coordinator{
		Workers: s.WorkerCount(), FirstAttempt: first,
		MaxRestarts: int(s.MaxRestarts), MaxDisruptions: int(s.DisruptionLimit()),
		Restarts: w.cfg.Restarts, Disruptions: w.cfg.Disruptions, Secret: w.cfg.GangSecret, Dropped: w.cfg.Dropped,
		JoinWait: w.opts.PrimaryWait, StopWait: time.Duration(s.GracePeriod())*time.Second + stopSlack,
		Prepare: w.prepareAttempt, Stopping: w.stoppingAttempt, GrowWhen: w.growWhen, Notify: w.console.Notice, Logger: w.opts.Logger,
	}
}

// prepareAttempt is worker 0's step before the coordinator starts attempt n: the previous
// attempt's last checkpoint commit ends, and the checkpoint n resumes from is chosen, so
// that the other workers (which look for it once they are told to start) find the same.
func (w *worker) prepareAttempt(_ context.Context, n int) error {
	env, err := w.session.AttemptEnv(n)
	if err != nil {
		return err
	}
	if w.gang.store != nil {
		// Every member confirmed the previous attempt's processes gone, and none of this
		// attempt's has started: its ranks see none of the last one's keys (torch 2.x's
		// clients use no per-attempt prefix under an agent's store).
		w.gang.store.Reset()
	}
	w.gang.mu.Lock()
	defer w.gang.mu.Unlock()
	w.gang.prepared = map[int]map[string]string{n: env}
	return nil
}

// growWhen is the coordinator's GrowWhen on worker 0: a gang whose readmitted workers are
// connected grows at the next checkpoint committed from now, or the job's resize interval
// after the readmit, whichever comes first (at once when the ranks report no checkpoint
// through the helper: there is none to wait for).
func (w *worker) growWhen(_ int, readmitted time.Time) <-chan struct{} {
	ch := make(chan struct{})
	n := w.session.Notice()
	left := time.Until(readmitted.Add(w.job.Spec.ResizeInterval()))
	if n == nil || !n.Listening() || left <= 0 {
		close(ch)
		return ch
	}
	commit := n.CommittedAfter(time.Now())
	go func() {
		t := time.NewTimer(left)
		defer t.Stop()
		select {
		case <-commit:
		case <-t.C:
		}
		close(ch)
	}()
	return ch
}

// stoppingAttempt is worker 0's step as the coordinator begins to stop an attempt: the
// store is emptied and its connections closed, so that a rank blocked in a store call
// (init_process_group waiting for a peer that died, a barrier) fails at once. Such a rank
// does not run a Python SIGTERM handler until the call returns: with rank 0's store it
// failed once rank 0 was gone, and with a store that outlives the attempt it would wait for
// the grace period's SIGKILL. prepareAttempt empties the store again (a member's ranks may
// still write to it while they stop).
func (w *worker) stoppingAttempt(int) {
	if w.gang.store != nil {
		w.gang.store.Reset()
	}
}

// attemptEnv is the launcher's AttemptEnv: what prepareAttempt made on worker 0, else the
// session's.
func (w *worker) attemptEnv(n int) (map[string]string, error) {
	w.gang.mu.Lock()
	env, ok := w.gang.prepared[n]
	delete(w.gang.prepared, n)
	w.gang.mu.Unlock()
	if ok {
		return maps.Clone(env), nil
	}
	return w.session.AttemptEnv(n)
}

// runAttempt runs this worker's ranks of the attempt st, for the gang's member.
func (w *worker) runAttempt(ctx context.Context, st gang.Start) gang.Ended {
	n := st.Attempt
	failed := func(err error) gang.Ended {
		return gang.Ended{Outcome: gang.Failed, Reason: fmt.Sprintf("could not run attempt %d: %v", n, err), Rank: -1, ExitCode: -1}
	}
	w.gang.warming.Lock() // spares that waiting starts are there before the ranks look
	first := !w.gang.started.Swap(true)
	err := w.launcher()
	w.gang.warming.Unlock()
	if err != nil {
		return failed(err)
	}
	if first {
		w.gang.l.PreviousWorldSize = previousWorkers(w.folder.Record(), n) * w.job.Spec.ProcCount()
	}
	w.cfg.Attempt = n
	w.place(st)
	var res launcher.AttemptResult
	w.pre.attempt(func() bool {
		res, err = w.gang.l.RunAttempt(ctx, n)
		return w.gang.l.Preempted() != ""
	})
	w.res = res
	switch {
	case err != nil:
		return failed(err)
	case res.Outcome == launcher.Succeeded:
		return gang.Ended{Outcome: gang.Succeeded, Rank: -1, ExitCode: -1}
	case res.Hung:
		return gang.Ended{Outcome: gang.Hung, Reason: res.Reason, Rank: -1, ExitCode: -1}
	}
	return gang.Ended{Outcome: gang.Failed, Reason: res.Reason, Rank: res.FailedRank, ExitCode: res.ExitCode}
}

// launcher makes the worker's launcher, once: for the first attempt this pod runs, or
// prepares while it waits.
func (w *worker) launcher() error {
	if w.folder == nil {
		if err := w.openSecondary(w.gang.extra); err != nil {
			return err
		}
	}
	if w.gang.l != nil {
		return nil
	}
	w.gang.l = &launcher.Launcher{Job: w.job.DeepCopy(), Folder: w.folder, Console: w.console, Logger: w.opts.Logger,
		Placement: launcher.Placement{Slots: []launcher.Slot{{Worker: w.cfg.Worker, GPUs: w.gang.gpus}},
			MasterAddr: w.cfg.MasterAddr, MasterPort: w.cfg.MasterPort, NodePerWorker: true,
			StoreHosted: launcher.AgentStoreWanted(w.job), MilliCPU: w.cfg.MilliCPU},
		ExtraEnv: w.gang.extra, RayCompat: python.CompatDir(w.gang.helper), AttemptEnv: w.attemptEnv,
		ForceKill: w.opts.ForceKill, Preempt: w.pre.relay, Notice: w.session.Notice(), KeepSpares: stoppedForRestart}
	w.session.OnActivity(w.gang.l.ReportedBy)
	return nil
}

// waiting is the member's Waiting: a worker just connected to its gang that has not
// started an attempt yet (the gang may wait for other workers, or this worker wait to join
// a gang that runs until its next checkpoint) starts its ranks' Pythons, so that they
// import torch meanwhile; its first attempt runs on them when they fit (launcher.Warm).
// When that attempt started first, it does nothing.
func (w *worker) waiting(ctx context.Context) {
	w.gang.warming.Lock()
	defer w.gang.warming.Unlock()
	if ctx.Err() != nil || w.gang.started.Load() {
		return
	}
	if err := w.launcher(); err != nil {
		w.opts.Logger.Warn("no prestarted Pythons while the gang waits", "err", err)
		return
	}
	n, err := w.gang.l.Warm(ctx)
	switch {
	case err != nil:
		w.opts.Logger.Info("no prestarted Pythons while the gang waits", "err", err)
	case n > 0:
		w.console.Notice(fmt.Sprintf("worker %d waits for its gang: %d Python(s) import torch meanwhile", w.cfg.Worker, n))
	}
}

// place puts this worker where the coordinator's start says, when the gang went on without
// some workers (gang.Coordinator.Drop): the gang's size is then the workers left, and this
// worker's node rank its place among them, so its ranks are numbered from node × the
// processes per worker, and the ranks see the new WORLD_SIZE (and the one before, as
// TRAINYARD_PREVIOUS_WORLD_SIZE). A start that says nothing (Nodes 0) leaves the pod's own.
func (w *worker) place(st gang.Start) {
	l := w.gang.l
	if st.Nodes <= 0 || (st.Nodes == l.Job.Spec.WorkerCount() && st.Node == l.Placement.Slots[0].Worker) {
		return
	}
	if l.MaxWorkers == 0 {
		l.MaxWorkers = w.job.Spec.WorkerCount()
	}
	nodes := int32(st.Nodes)
	l.Job.Spec.Workers = &nodes
	l.Placement.Slots[0].Worker = st.Node
	ranks := make([]int, l.Job.Spec.ProcCount())
	for i := range ranks {
		ranks[i] = launcher.RankOf(l.Job, st.Node, i)
	}
	w.session.SetRanks(ranks)
	w.console.Notice(fmt.Sprintf("attempt %d: the gang runs with %d of its %d workers; worker %d runs as node %d, ranks %d to %d",
		st.Attempt, st.Nodes, w.job.Spec.WorkerCount(), w.cfg.Worker, st.Node, ranks[0], ranks[len(ranks)-1]))
}

// stoppedForRestart is the launcher's KeepSpares: an attempt the gang's coordinator
// stopped is usually followed by the next on the same pods (a peer's rank failed), so the
// ranks' spares, which already imported torch, are kept for it, as `trainyard run` keeps
// them for its restarts; without that, every worker but the failed one's would restart
// its ranks cold. A pod that stops, or a gang that finished, drops them.
func stoppedForRestart(cause error) bool { return errors.Is(cause, gang.ErrStopped) }

// previousWorkers is the number of workers of the run's latest attempt before attempt n
// that run.json records (0: none, or not recorded): the gang's size before the operator
// resized it, when it differs from this one's.
func previousWorkers(rec rundir.Record, n int) int {
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		if a := rec.Attempts[i]; a.Number < n {
			return a.Workers
		}
	}
	return 0
}

// gangSummary adds to a worker's summary how far the gang went: every worker says
// whether it failed for good; worker 0 adds the restarts it made in place.
func (w *worker) gangSummary(sum *workload.Summary) {
	if f := w.gang.fin; f != nil {
		sum.Attempt, sum.Restarts, sum.Disruptions = f.Attempt, int32(f.Restarts), int32(f.Disruptions)
		if f.Outcome != gang.Succeeded {
			sum.Final = f.Final
		}
	}
	if c := w.gang.coord.Load(); c != nil {
		st := c.Status()
		sum.InPlace, sum.LastRestart = int32(st.InPlace), st.LastRestart
		sum.Dropped, sum.Resized = st.Dropped, st.Resized
		if sum.Attempt == 0 {
			sum.Attempt, sum.Restarts, sum.Disruptions = st.Attempt, int32(st.Restarts), int32(st.Disruptions)
		}
	}
}

// gangProgress adds where the gang is to worker 0's progress.
func (w *worker) gangProgress(sum *workload.Summary) {
	c := w.gang.coord.Load()
	if c == nil {
		return
	}
	st := c.Status()
	sum.Attempt, sum.Restarts, sum.Disruptions = st.Attempt, int32(st.Restarts), int32(st.Disruptions)
	sum.InPlace, sum.LastRestart = int32(st.InPlace), st.LastRestart
	sum.Dropped, sum.Resized = st.Dropped, st.Resized
	if st.State == gang.Restarting {
		sum.Outcome, sum.Reason, sum.Growing = workload.OutcomeRestarting, st.Why, st.Growing
	}
}

// hostname is the pod's name (an Indexed Job's pod's host name), for the gang's messages.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}
