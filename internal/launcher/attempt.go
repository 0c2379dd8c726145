package launcher

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/internal/preempt"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/units"
)

// drainTimeout bounds the wait for a gang's output after its processes are gone (a
// grandchild that escaped its process group can hold the pipe open).
const drainTimeout = 2 * time.Second

// Outcome is how an attempt ended.
type Outcome string

// The ways an attempt ends.
const (
	Succeeded   Outcome = "succeeded"
	Failed      Outcome = "failed"
	Interrupted Outcome = "interrupted"
)

// AttemptResult says how an attempt ended and, for a failure, which rank caused it.
type AttemptResult struct {
	Outcome Outcome
	// Reason is a sentence: "rank 1 (worker 1, pid 4242) was killed by SIGKILL".
	Reason string
	// FailedRank is the rank whose failure ended the attempt, or -1.
	FailedRank int
	// ExitCode is that rank's exit code, or -1 (killed by a signal, or no rank).
	ExitCode int
	// Hung is set when the hang timeout ended the attempt.
	Hung bool
	// Teardown is the time from the first failure (or interruption) to the last process
	// of the gang gone.
	Teardown time.Duration
}

// attempt is one start of the gang on this machine.
type attempt struct {
	l       *Launcher
	number  int
	port    int
	env     map[string]string
	procs   []*process
	records []rundir.Rank
}

// run starts every process and supervises them until all have exited.
func (a *attempt) run(ctx context.Context) AttemptResult {
	procs := a.l.procs(a.number, a.port)
	a.procs = make([]*process, len(procs))
	a.records = make([]rundir.Rank, len(procs))
	exits := make(chan exit, len(procs))
	envs := make([][]string, len(procs))
	for i, p := range procs {
		envs[i] = Env(a.l.Job, p, a.l.Folder.Dir, os.Environ(), a.env)
		pr, err := a.startOne(i, p, envs[i])
		if err != nil {
			exits <- exit{idx: i, at: time.Now(), code: -1, err: err}
			continue
		}
		a.procs[i] = pr
		go func() { exits <- pr.wait(i) }()
	}
	a.l.spares.drop() // those this attempt could not use
	if n := a.prestarted(); n > 0 {
		a.l.notice("attempt %d: %d of %d rank(s) run on prestarted Pythons (torch already imported)", a.number, n, len(procs))
	}
	a.save()
	a.l.Touch()
	done, prestarted := make(chan struct{}), make(chan struct{})
	if py, ok := a.l.prestarts(); ok {
		go func() { defer close(prestarted); a.prestart(py, envs, done) }()
	} else {
		close(prestarted)
	}
	res := a.supervise(ctx, exits)
	close(done)
	<-prestarted
	a.drain()
	return res
}

// prestarted counts the attempt's ranks that run on spares.
func (a *attempt) prestarted() int {
	n := 0
	for _, r := range a.records {
		if r.Prestarted {
			n++
		}
	}
	return n
}

// startOne starts process i of the attempt, p, with env: on its spare when one fits.
func (a *attempt) startOne(i int, p Proc, env []string) (*process, error) {
	a.records[i] = rundir.Rank{Rank: p.Rank, Worker: p.Worker, LocalRank: p.LocalRank,
		GPUs: gpuList(p.WorkerGPUs), Log: rundir.LogPath(a.number, p.Rank), Started: time.Now()}
	rec := &a.records[i]
	log, err := a.l.Folder.CreateLog(a.number, p.Rank)
	if err != nil {
		return nil, err
	}
	s := &a.l.Job.Spec
	args := append(append([]string{}, s.Command...), s.Args...)
	a.l.TouchRank(p.Rank) // its silence counts from its start
	touch := func() { a.l.TouchRank(p.Rank) }
	if py, ok := a.l.pythonRun(); ok {
		sp, misfit := a.l.spares.take(i, a.l.path, py, p, env)
		if misfit != "" {
			a.l.notice("attempt %d: rank %d starts in a new Python, not in its waiting spare, which was made for another shape of gang (%s)",
				a.number, p.Rank, misfit)
		}
		if sp != nil {
			if err := sp.hand(s.WorkingDir, env, py, args); err != nil {
				a.l.notice("attempt %d: rank %d starts afresh: its prestarted Python did not take it (%v)", a.number, p.Rank, err)
				sp.kill()
			} else {
				rec.PID, rec.Prestarted = sp.os.Pid, true
				return attach(sp.os, sp.out, p, log, a.l.Console, touch, a.l.kill), nil
			}
		}
	}
	pr, err := start(a.l.path, args, s.WorkingDir, env, p, log, a.l.Console, touch, a.l.kill)
	if err != nil {
		log.Close()
		return nil, err
	}
	rec.PID = pr.pid
	return pr, nil
}

// supervise waits for every process. On the first failure or on ctx's end it sends
// SIGTERM to every process group whose worker is still running, and SIGKILL after the
// grace period. What a worker leaves behind in its group is killed when it exits (see
// process.wait), so no group is signalled after its worker was reaped. A preemption
// (Launcher.Preempt) first gives the ranks the preemption notice (see preempting).
func (a *attempt) supervise(ctx context.Context, exits <-chan exit) AttemptResult {
	res := AttemptResult{Outcome: Succeeded, FailedRank: -1, ExitCode: -1}
	grace := time.Duration(a.l.Job.Spec.GracePeriod()) * time.Second
	var (
		stopping  bool
		stopAt    time.Time
		killTimer <-chan time.Time
		done      = ctx.Done()
		force     = a.l.ForceKill
		hang      = a.hangTicker()
		pre       preemption
		preempt   = a.l.Preempt
		resize    = a.l.Resize
		rz        resizing
	)
	stop := func(outcome Outcome, reason string, rank int, killAfter time.Duration) {
		res = AttemptResult{Outcome: outcome, Reason: reason, FailedRank: rank, ExitCode: -1}
		stopping, stopAt, hang = true, time.Now(), nil
		pre.end()
		rz.stop()
		if a.l.store != nil {
			// A rank blocked in a store call runs no Python SIGTERM handler until the call
			// returns: closing its connection ends the call now, not at the SIGKILL.
			a.l.store.Reset()
		}
		a.signalLive(syscall.SIGTERM)
		a.signalLive(syscall.SIGCONT) // a stopped process handles SIGTERM only once resumed
		killTimer = time.After(killAfter)
	}
	for live := len(a.procs); live > 0; {
		select {
		case e := <-exits:
			live--
			a.recordExit(e, stopping)
			switch {
			case stopping:
			case pre.on():
				stop(Interrupted, pre.reason+"; "+a.describe(e)+" after the notice", -1, pre.left(grace))
				if live > 0 {
					a.l.notice("%s; stopping the other %d", res.Reason, live)
				}
			case e.failed():
				stop(Failed, a.describe(e), a.records[e.idx].Rank, grace)
				if e.err == nil && e.sig == "" {
					res.ExitCode = e.code
				}
				if live > 0 {
					a.l.notice("%s; stopping the other %d", res.Reason, live)
				}
			}
		case <-done:
			done = nil
			if !stopping {
				stop(Interrupted, "interrupted", -1, grace)
				a.l.notice("interrupted: stopping the gang (SIGTERM, SIGKILL after %s)", grace)
			}
		case why := <-preempt:
			preempt = nil
			a.l.preempted = why
			if stopping {
				break
			}
			if !pre.begin(a.l, why, grace, true) {
				stop(Interrupted, why, -1, grace)
				a.l.notice("%s: stopping the gang (SIGTERM, SIGKILL after %s)", why, grace)
			}
		case r := <-resize:
			if stopping {
				a.l.resize = &r // for the next attempt, if there is one
				break
			}
			why := "resizing to " + units.Count(len(r.Slots), "worker") + ": " + r.Reason
			switch now, notice := a.askResize(r, &rz); {
			case now:
				stop(Interrupted, why, -1, grace)
				a.l.notice("%s: stopping the gang (SIGTERM, SIGKILL after %s)", why, grace)
			case notice && !pre.on() && !pre.begin(a.l, why, grace, false):
				stop(Interrupted, why, -1, grace)
				a.l.notice("%s: stopping the gang (SIGTERM, SIGKILL after %s)", why, grace)
			}
		case <-rz.timer:
			if now, why := a.growAnyway(&rz, &pre, grace); now {
				stop(Interrupted, why, -1, grace)
				a.l.notice("stopping the gang to resize it (SIGTERM, SIGKILL after %s)", grace)
			}
		case name := <-rz.commit:
			stop(Interrupted, fmt.Sprintf("resizing to %s at %s", units.Count(len(a.l.resize.Slots), "worker"), name), -1, grace)
			a.l.notice("%s committed: stopping the gang to resize it (SIGTERM, SIGKILL after %s)", name, grace)
		case name := <-pre.saved:
			stop(Interrupted, fmt.Sprintf("%s; %s committed%s after the notice", pre.reason, name, a.l.uploadedTo()), -1, pre.left(grace))
			a.l.notice("%s committed%s after the preemption notice; stopping the gang", name, a.l.uploadedTo())
		case <-pre.timer:
			stop(Interrupted, pre.reason+"; no checkpoint committed"+a.l.uploadedTo()+" after the notice", -1, pre.left(grace))
			a.l.notice("no checkpoint committed%s by the notice's deadline; stopping the gang (SIGTERM, SIGKILL after %s)%s",
				a.l.uploadedTo(), pre.left(grace).Round(time.Second), a.resumeNote())
		case <-hang:
			if limit := a.hangTimeout(); a.l.idle() > limit {
				stop(Failed, fmt.Sprintf("no rank printed or reported anything for %s (--hang-timeout): the gang looks hung%s",
					limit, a.quietest()), -1, grace)
				res.Hung = true
				a.l.notice("%s; stopping it", res.Reason)
			}
		case <-killTimer:
			killTimer = nil
			a.signalLive(syscall.SIGKILL)
		case <-force:
			force = nil
			a.signalLive(syscall.SIGKILL)
		}
	}
	if stopping {
		res.Teardown = time.Since(stopAt)
	}
	return res
}

// preemption is a preemption notice the ranks of an attempt were given: while it is on,
// supervise waits for a checkpoint committed after it (saved) or its deadline (timer).
type preemption struct {
	reason string
	at     time.Time
	saved  <-chan string
	timer  <-chan time.Time
}

// begin posts the notice, unless the ranks cannot hear it (no rank reported through the
// helper) or the grace period leaves no time to save; it says whether it did. signaled
// says that a signal to the launcher asked for it, which another signal cuts short.
func (p *preemption) begin(l *Launcher, why string, grace time.Duration, signaled bool) bool {
	now := time.Now()
	deadline := preempt.Deadline(now, grace)
	if l.Notice == nil || !l.Notice.Listening() || deadline.IsZero() {
		return false
	}
	if err := l.Notice.Post(deadline, why); err != nil {
		l.Logger.Warn("could not give the ranks the preemption notice", "err", err)
		return false
	}
	*p = preemption{reason: why, at: now, saved: l.Notice.Saved(), timer: time.After(deadline.Sub(now))}
	hint := ""
	if signaled {
		hint = ". Interrupt again to stop it now"
	}
	l.notice("%s: the ranks have until %s (%s) to save a checkpoint (trainyard.preemption() says so); "+
		"then the gang stops%s", why, deadline.Format("15:04:05"), deadline.Sub(now).Round(time.Second), hint)
	return true
}

// on says whether the notice is out and the gang not yet stopping.
func (p *preemption) on() bool { return p.timer != nil }

// end stops waiting for the notice's outcome.
func (p *preemption) end() { p.saved, p.timer = nil, nil }

// left is what remains of the grace period since the notice (all of it when none was
// given), at least a second, for the ranks to exit after SIGTERM.
func (p *preemption) left(grace time.Duration) time.Duration {
	if p.at.IsZero() {
		return grace
	}
	return max(grace-time.Since(p.at), time.Second)
}

// quietest says which rank here went quiet first, for a hang's reason: "; rank 1 went
// quiet first (nothing for 12m3s)", or "" with a single rank.
func (a *attempt) quietest() string {
	ranks := make([]int, len(a.records))
	for i, r := range a.records {
		ranks[i] = r.Rank
	}
	if len(ranks) < 2 {
		return ""
	}
	rank, at := a.l.quietest(ranks)
	return fmt.Sprintf("; rank %d went quiet first (nothing for %s)", rank, time.Since(at).Round(100*time.Millisecond))
}

func (a *attempt) hangTimeout() time.Duration {
	return time.Duration(a.l.Job.Spec.HangTimeoutSeconds) * time.Second
}

// hangTicker ticks while the hang timeout is on, often enough to notice a hang within a
// few percent of the timeout.
func (a *attempt) hangTicker() <-chan time.Time {
	limit := a.hangTimeout()
	if limit <= 0 {
		return nil
	}
	return time.Tick(min(max(limit/20, 10*time.Millisecond), time.Second))
}

func (a *attempt) describe(e exit) string {
	r := a.records[e.idx]
	return fmt.Sprintf("rank %d (worker %d, pid %d) %s", r.Rank, r.Worker, r.PID, e.describe())
}

func (a *attempt) recordExit(e exit, stopping bool) {
	r := &a.records[e.idx]
	at := e.at
	r.Ended = &at
	if e.err != nil {
		r.Error = e.err.Error()
	} else if e.sig != "" {
		r.Signal = e.sig
	} else {
		code := e.code
		r.ExitCode = &code
	}
	r.StoppedByTrainyard = stopping
	a.save()
}

// signalLive signals the process groups of the workers that have not been reaped.
func (a *attempt) signalLive(sig syscall.Signal) {
	for _, pr := range a.procs {
		if pr != nil {
			pr.signal(sig)
		}
	}
}

// drain waits, for a bounded time, until every process's output has been copied.
func (a *attempt) drain() {
	deadline := time.After(drainTimeout)
	for _, pr := range a.procs {
		if pr == nil {
			continue
		}
		select {
		case err := <-pr.copied:
			if err != nil {
				a.l.Logger.Warn("copy worker output", "rank", pr.proc.Rank, "err", err)
			}
		case <-deadline:
			a.l.Logger.Warn("worker output still open after the gang ended; giving up on it", "rank", pr.proc.Rank)
			return
		}
	}
}

// save writes the attempt's rank records into the run record.
func (a *attempt) save() {
	ranks := append([]rundir.Rank(nil), a.records...)
	err := a.l.Folder.Update(func(rec *rundir.Record) {
		rec.Attempts[len(rec.Attempts)-1].Ranks = ranks
	})
	if err != nil {
		a.l.Logger.Warn("save run record", "err", err)
	}
}
