package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/preempt"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/tcpstore"
)

// Launcher runs the part of a job's gang that its Placement puts on this machine, and
// restarts the whole gang after a failure, up to the job's maxRestarts.
type Launcher struct {
	// Job is defaulted and validated (see jobspec.Resolve), and passed Preflight.
	Job       *v1.TrainJob
	Placement Placement
	// Folder is the run's open folder: logs and the attempt record go there.
	Folder *rundir.Run
	// Console receives the workers' lines and Trainyard's notices.
	Console *logstream.Console
	// Logger receives diagnostics that are not for the console.
	Logger *slog.Logger
	// ExtraEnv is set in every process, below the job's own env.
	ExtraEnv map[string]string
	// AttemptEnv, when set, is called before each attempt for more variables (the
	// checkpoint to resume from, say); they are set below the job's own env.
	AttemptEnv func(attempt int) (map[string]string, error)
	// ForceKill, when closed, makes a running teardown send SIGKILL at once.
	ForceKill <-chan struct{}
	// Preempt receives why the gang must stop when the stop is not the job's own doing (a
	// signal to the launcher, a preemption): the ranks get the preemption notice and until
	// its deadline to commit a checkpoint before they are stopped (see package preempt).
	// The run then ends interrupted, whatever its ranks did.
	Preempt <-chan string
	// Notice is the run's preemption notice (reporting.Session.Notice). Without it, or when
	// no rank has reported through the helper, a preemption stops the ranks at once.
	Notice *preempt.Notice
	// Resize receives requests to run an elastic gang at another size (see Resize); nil
	// when nobody resizes it but the launcher itself (after failures).
	Resize <-chan Resize
	// MaxWorkers is the most workers an elastic gang may have, when it starts with fewer
	// (`trainyard run --start-workers`); 0 means spec.workers.
	MaxWorkers int
	// PreviousWorldSize is the world size the run had before this launcher's first
	// attempt, when someone else resized the gang (the operator's pods of a resized
	// TrainJob): that attempt's ranks get it as TRAINYARD_PREVIOUS_WORLD_SIZE when it
	// differs from theirs. 0: none.
	PreviousWorldSize int
	// RayCompat, when set, is a folder holding Trainyard's ray compatibility package
	// (python.CompatDir). It is appended to the workers' PYTHONPATH only when the job's
	// Python cannot import ray by itself, so that a real Ray is never shadowed.
	RayCompat string
	// Adopted are the spares of the standby this process was (TakeSpares): the first
	// attempt's ranks run on those that fit them.
	Adopted *Spares
	// KeepSpares, when set, says whether an attempt that RunAttempt's context stopped,
	// with this cause (context.Cause), is likely followed by another at once on this
	// machine (a gang's coordinator stopped it for a restart in place): its spares are then
	// kept for that attempt, until DropSpares or the next RunAttempt. Without it, a stopped
	// attempt's spares are dropped.
	KeepSpares func(cause error) bool

	path     string       // the resolved program
	rayPath  string       // RayCompat when the workers get it, else ""
	kill     killFunc     // signals processes and groups: syscall.Kill unless a test sets it
	activity atomic.Int64 // unix nanoseconds of the last line or report of any rank
	reports  atomic.Int64 // reports of the current attempt's ranks (ReportedBy)
	// sameFailed says why the run stopped without restarting after a failure that
	// sameFailure found to be the script's; startFailed is the previous attempt's
	// failure at its ranks' start, if it had one.
	sameFailed  string
	startFailed startFailure
	heardMu     sync.Mutex
	heard       map[int]time.Time // the last line or report of each rank on this machine
	// preempted is why the gang was preempted ("" when it was not); set by an attempt's
	// supervise, read once the attempt ended.
	preempted string
	elastic   elastic // an elastic gang's resizes (spec.minWorkers)
	// resize is the resize asked while an attempt ran, applied before the next one; nil
	// when none.
	resize *Resize
	// store is the gang's rendezvous store while the launcher hosts one (see hostsStore):
	// started before the first attempt's ranks, reused by the next attempts, closed when
	// Run ends (or the attempt, when RunAttempt is called alone).
	store *tcpstore.Server
	inRun bool // Run is running: RunAttempt leaves the store to it
	// spares are the prestarted Pythons for the next attempt's ranks (spare.go).
	spares spares
	// final is set by Run for an attempt that no restart or resize of its own can follow:
	// it gets no spares.
	final bool
}

// prestarts says whether the attempts' ranks get spares (spare.go), and how the command
// runs Python: when the command runs a Python script, a restart or resize may follow, and
// the job does not turn them off (PrestartEnv).
func (l *Launcher) prestarts() (pythonRun, bool) {
	s := &l.Job.Spec
	if l.final || s.MaxRestarts == 0 && l.fixedSize() {
		return pythonRun{}, false
	}
	return l.pythonRun()
}

// pythonRun reads the job's command as a Python run, unless the job turns spares off
// (PrestartEnv).
func (l *Launcher) pythonRun() (pythonRun, bool) {
	s := &l.Job.Spec
	if on, _ := prestartSetting(l.Job); !on || len(s.Command) == 0 {
		return pythonRun{}, false
	}
	return parsePython(append([]string{l.path}, append(s.Command[1:], s.Args...)...))
}

// fixedSize reports whether the gang can run at no other size: not elastic, and not
// started below its most workers.
func (l *Launcher) fixedSize() bool {
	s := &l.Job.Spec
	return s.MinWorkerCount() >= max(s.WorkerCount(), l.MaxWorkers)
}

// uploadedTo is " and uploaded to s3://..." for a run kept in a bucket, whose checkpoints
// count as saved once uploaded (internal/mirror), and "" otherwise.
func (l *Launcher) uploadedTo() string {
	if !jobspec.InBucket(l.Job.Spec.StoragePath) {
		return ""
	}
	return " and uploaded to " + strings.TrimSuffix(l.Job.Spec.StoragePath, "/") + "/" + l.Job.Spec.RunName
}

// Preempted says why the gang was preempted, "" when it was not. It is set while an
// attempt runs (RunAttempt) and read after it.
func (l *Launcher) Preempted() string { return l.preempted }

// Touch records that the gang did something: a rank printed or reported. The hang
// timeout counts from the last touch.
func (l *Launcher) Touch() { l.activity.Store(time.Now().UnixNano()) }

// TouchRank records that a rank printed or reported (Touch), and when, so that a hang
// says which rank went quiet first.
func (l *Launcher) TouchRank(rank int) {
	now := time.Now()
	l.activity.Store(now.UnixNano())
	l.heardMu.Lock()
	defer l.heardMu.Unlock()
	if l.heard == nil {
		l.heard = map[int]time.Time{}
	}
	l.heard[rank] = now
}

// quietest says which of ranks was last heard from longest ago, and when: the rank a
// hang most likely began with.
func (l *Launcher) quietest(ranks []int) (int, time.Time) {
	l.heardMu.Lock()
	defer l.heardMu.Unlock()
	rank, at := -1, time.Time{}
	for _, r := range ranks {
		if t := l.heard[r]; rank < 0 || t.Before(at) {
			rank, at = r, t
		}
	}
	return rank, at
}

// idle returns how long the gang has done nothing.
func (l *Launcher) idle() time.Duration {
	return time.Since(time.Unix(0, l.activity.Load()))
}

// Result is how the run ended.
type Result struct {
	Outcome  Outcome
	Reason   string
	Attempts int
	Last     AttemptResult
	Duration time.Duration
}

// Run runs attempts until one succeeds, ctx ends, or the restarts are used up. It records
// every attempt in the run folder.
func (l *Launcher) Run(ctx context.Context) (Result, error) {
	if err := l.prepare(ctx); err != nil {
		return Result{}, err
	}
	l.inRun = true
	defer func() { l.inRun = false; l.closeStore(); l.spares.drop() }()
	begin := time.Now()
	first := len(l.Folder.Record().Attempts) + 1
	last := first + int(l.Job.Spec.MaxRestarts)
	var (
		res AttemptResult
		err error
	)
	n := first
	for ; ; n++ {
		l.final = n == last && l.fixedSize() && l.Resize == nil
		if res, err = l.RunAttempt(ctx, n); errors.Is(err, rundir.ErrReplaced) {
			return Result{}, errors.Join(err, l.finish(Result{Outcome: Failed, Reason: err.Error()}))
		}
		if err != nil {
			return Result{}, err
		}
		if ctx.Err() == nil && l.preempted == "" && res.Outcome == Interrupted && l.resize != nil {
			last++ // a resize uses no restart
			l.elastic.resizes++
			from, why := l.applyResize()
			l.notice("attempt %d stopped to resize: %s from %d to %d workers: %s; the gang goes on from its latest checkpoint (no restart used)",
				n, resizeVerb(from, l.Job.Spec.WorkerCount()), from, l.Job.Spec.WorkerCount(), why)
			continue
		}
		if res.Outcome != Failed || ctx.Err() != nil || l.preempted != "" {
			break
		}
		if l.resize != nil { // asked while the attempt failed: the restart has the new size
			from, why := l.applyResize()
			l.notice("%s from %d to %d workers: %s", resizeVerb(from, l.Job.Spec.WorkerCount()), from, l.Job.Spec.WorkerCount(), why)
		}
		if from, why, ok := l.shrink(res); ok {
			last++ // a resize uses no restart
			l.notice("attempt %d failed: %s; resized from %d to %d workers: %s; the gang goes on from its latest checkpoint (no restart used)",
				n, res.Reason, from, l.Job.Spec.WorkerCount(), why)
			continue
		}
		if n == last {
			break
		}
		if why := l.sameFailure(n); why != "" {
			l.sameFailed = why
			l.notice("attempt %d failed: %s", n, why)
			break
		}
		l.notice("attempt %d failed: %s; gang stopped in %s; restarting the gang (restart %d of %d)",
			n, res.Reason, res.Teardown.Round(time.Millisecond), l.restartsUsed(n, first), l.Job.Spec.MaxRestarts)
	}
	if l.preempted != "" && res.Outcome == Failed { // preempted while a failed attempt stopped
		res.Outcome, res.Reason = Interrupted, l.preempted+" while the gang stopped after "+res.Reason
	}
	out := Result{Outcome: res.Outcome, Attempts: n - first + 1, Last: res, Duration: time.Since(begin)}
	out.Reason = l.finalReason(res, n, last)
	return out, l.finish(out)
}

// prepare sets the defaults, finds the program and decides whether the workers get the
// ray compatibility package, once.
func (l *Launcher) prepare(ctx context.Context) error {
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
	if l.kill == nil {
		l.kill = syscall.Kill
	}
	l.adopt()
	if l.path != "" {
		return nil
	}
	path, err := LookPath(l.Job)
	if err != nil {
		return err
	}
	l.path = path
	if l.RayCompat == "" {
		return nil
	}
	offer, err := l.offerRay(ctx)
	if err != nil {
		l.Logger.Warn("ray compatibility package not offered: could not tell whether the job's Python has ray",
			"reason", err.Error())
	}
	if offer {
		l.rayPath = l.RayCompat
		l.Logger.Debug("the job's Python has no ray: the workers import Trainyard's", "folder", l.RayCompat)
	}
	return nil
}

func (l *Launcher) finalReason(res AttemptResult, n, last int) string {
	switch res.Outcome {
	case Succeeded:
		if l.Job.Spec.WorldSize() == 1 {
			return fmt.Sprintf("its one rank exited 0 in attempt %d", n)
		}
		return fmt.Sprintf("all %d ranks exited 0 in attempt %d", l.Job.Spec.WorldSize(), n)
	case Interrupted:
		if l.preempted != "" {
			return fmt.Sprintf("preempted in attempt %d (%s)", n, res.Reason)
		}
		return fmt.Sprintf("interrupted in attempt %d", n)
	}
	if l.sameFailed != "" {
		return fmt.Sprintf("%s in attempt %d; not restarted: every rank failed the same way at its start "+
			"(%s=1 restarts it anyway)", res.Reason, n, SameFailureEnv)
	}
	return fmt.Sprintf("%s in attempt %d of %d; no restarts left (max restarts %d)",
		res.Reason, n, last, l.Job.Spec.MaxRestarts)
}

func (l *Launcher) finish(res Result) error {
	phase := map[Outcome]v1.JobPhase{Succeeded: v1.PhaseSucceeded, Failed: v1.PhaseFailed, Interrupted: v1.PhaseInterrupted}[res.Outcome]
	return l.Folder.Update(func(rec *rundir.Record) {
		now := time.Now()
		rec.Phase, rec.Reason, rec.Supervisor = phase, res.Reason, 0
		if l.preempted != "" {
			rec.Preemptions++
		}
		if phase.Finished() {
			rec.Finished = &now
		}
	})
}

// RunAttempt starts the gang once, as attempt number n (1-based), and supervises it until
// every process has exited. A caller that restarts gangs itself (the Kubernetes operator
// does) calls this instead of Run.
func (l *Launcher) RunAttempt(ctx context.Context, n int) (AttemptResult, error) {
	if err := l.prepare(ctx); err != nil {
		return AttemptResult{}, err
	}
	if err := l.Folder.CheckSame(); err != nil {
		return AttemptResult{}, fmt.Errorf("attempt %d: %w", n, err)
	}
	if !l.inRun {
		defer l.closeStore()
	}
	port, err := l.attemptPort()
	if err != nil {
		return AttemptResult{}, err
	}
	env, err := l.attemptEnv(n)
	if err != nil {
		return AttemptResult{}, err
	}
	// Every rank a client of the launcher's store, or rank 0 hosts one (whatever an outer
	// launcher, whose environment this one inherits, told its own ranks).
	env[AgentStoreEnv] = map[bool]string{true: "True", false: "False"}[l.store != nil || l.Placement.StoreHosted]
	if err := l.beginAttempt(n, port); err != nil {
		return AttemptResult{}, err
	}
	a := &attempt{l: l, number: n, port: port, env: env}
	l.reports.Store(0)
	res := a.run(ctx)
	if !l.restartFollows(ctx, res) {
		if k := l.spares.count(); k > 0 && ctx.Err() != nil && l.KeepSpares != nil {
			l.notice("attempt %d: its %d prestarted Python(s) are dropped: it stopped for good (%v)", n, k, context.Cause(ctx))
		}
		l.spares.drop()
	}
	if err := l.endAttempt(res); err != nil {
		return res, err
	}
	return res, nil
}

// restartFollows says whether another attempt may follow res at once, so that its spares
// are worth keeping: res failed on its own, or the caller stopped it for a restart
// (KeepSpares).
func (l *Launcher) restartFollows(ctx context.Context, res AttemptResult) bool {
	if ctx.Err() != nil {
		return l.KeepSpares != nil && l.KeepSpares(context.Cause(ctx))
	}
	return res.Outcome == Failed
}

// attemptPort is the rendezvous port of an attempt: the placement's, else the store's that
// the launcher hosts, else a free one for rank 0 to host the store on.
func (l *Launcher) attemptPort() (int, error) {
	switch {
	case l.Placement.MasterPort != 0:
		return l.Placement.MasterPort, nil
	case l.hostsStore():
		return l.storePort()
	}
	return freePort(l.Placement.MasterAddr)
}

func (l *Launcher) attemptEnv(n int) (map[string]string, error) {
	env := maps.Clone(l.ExtraEnv)
	if env == nil {
		env = map[string]string{}
	}
	if l.rayPath != "" {
		env["PYTHONPATH"] = joinPath(env["PYTHONPATH"], l.rayPath)
	}
	env[rundir.IDEnv] = l.Folder.ID() // the helper checks the run folder against it
	l.elasticEnv(env)
	if l.AttemptEnv != nil {
		more, err := l.AttemptEnv(n)
		if err != nil {
			return nil, fmt.Errorf("prepare attempt %d: %w", n, err)
		}
		maps.Copy(env, more)
	}
	return env, nil
}

// workersHere says which workers of the gang this launcher starts: "2 worker(s)" when it
// starts them all, "worker 1 of 2" in one pod of a gang on Kubernetes.
func (l *Launcher) workersHere() string {
	slots, all := l.Placement.Slots, int(l.Job.Spec.WorkerCount())
	if len(slots) == all || len(slots) == 0 {
		return fmt.Sprintf("%d worker(s)", len(slots))
	}
	ids := make([]string, len(slots))
	for i, sl := range slots {
		ids[i] = strconv.Itoa(sl.Worker)
	}
	return fmt.Sprintf("worker %s of %d", strings.Join(ids, ","), all)
}

func (l *Launcher) beginAttempt(n, port int) error {
	s := &l.Job.Spec
	host := ""
	switch {
	case l.store != nil:
		host = " (hosted by trainyard)"
	case l.Placement.StoreHosted:
		host = " (hosted by worker 0's trainyard)"
	}
	l.notice("attempt %d: starting %s x %d process(es), rendezvous %s:%d%s, logs in %s",
		n, l.workersHere(), s.ProcCount(), l.Placement.MasterAddr, port, host, l.Folder.Dir)
	return l.Folder.Update(func(rec *rundir.Record) {
		rec.Phase, rec.Supervisor = v1.PhaseRunning, os.Getpid()
		rec.Host, _ = os.Hostname()
		if n > 1 {
			rec.Phase = v1.PhaseRestarting
		}
		rec.Attempts = append(rec.Attempts, rundir.Attempt{Number: n, MasterAddr: l.Placement.MasterAddr,
			MasterPort: port, Started: time.Now(), Workers: s.WorkerCount()})
	})
}

func (l *Launcher) endAttempt(res AttemptResult) error {
	if l.Console != nil {
		l.Console.Flush(true)
	}
	return l.Folder.Update(func(rec *rundir.Record) {
		a := &rec.Attempts[len(rec.Attempts)-1]
		now := time.Now()
		a.Ended, a.Outcome, a.Reason = &now, string(res.Outcome), res.Reason
	})
}

// procs lists the processes of an attempt on this machine, in rank order, numbered on
// this machine as torchrun numbers them on a node (see Placement.NodePerWorker).
func (l *Launcher) procs(attempt, port int) []Proc {
	return placeProcs(l.Job, l.Placement, attempt, port)
}

// placeProcs is procs for a job, placement, attempt and rendezvous port.
func placeProcs(job *v1.TrainJob, pl Placement, attempt, port int) []Proc {
	n := job.Spec.ProcCount()
	var visible []device.GPU // the GPUs of all the workers here, in worker order
	first := make([]int, len(pl.Slots))
	for i, slot := range pl.Slots {
		first[i] = len(visible)
		visible = append(visible, slot.GPUs...)
	}
	var out []Proc
	for i, slot := range pl.Slots {
		for local := range n {
			p := Proc{Attempt: attempt, Worker: slot.Worker, LocalRank: i*n + local,
				Rank: RankOf(job, slot.Worker, local), MasterAddr: pl.MasterAddr, MasterPort: port,
				GPUs: visible, WorkerGPUs: slot.GPUs, Device: first[i], HostProcs: n * len(pl.Slots), HostMilliCPU: pl.MilliCPU, Nodes: 1}
			if g := len(slot.GPUs); g > 0 {
				p.Device += local % g // the worker's GPUs are shared by its processes in turn
			}
			if pl.NodePerWorker {
				p.LocalRank, p.HostProcs, p.Node, p.Nodes = local, n, slot.Worker, job.Spec.WorkerCount()
			}
			out = append(out, p)
		}
	}
	return out
}

// notice prints a line of Trainyard's own on the console.
func (l *Launcher) notice(format string, args ...any) {
	if l.Console != nil {
		l.Console.Notice(fmt.Sprintf(format, args...))
	}
}
