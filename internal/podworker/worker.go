package podworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/pause"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/workload"
	"github.com/trainyard/trainyard/python"
)

// lockSlack is how much longer than the job's grace period worker 0 waits for the run
// folder's lock by default: the previous attempt's worker 0 holds it until its pod has
// stopped its ranks and finished its last checkpoint commit.
const lockSlack = 30 * time.Second

// lockPoll is how often worker 0 tries the run folder's lock again.
const lockPoll = 500 * time.Millisecond

// Options tune Run. The zero value writes the console to os.Stdout and waits as long as
// the defaults below say.
type Options struct {
	// Out receives the console: the ranks' prefixed lines and Trainyard's notices (the pod
	// log). Nil: os.Stdout.
	Out io.Writer
	// Logger receives diagnostics. Nil: none.
	Logger *slog.Logger
	// ForceKill, when closed, makes a running teardown send SIGKILL at once.
	ForceKill <-chan struct{}
	// Preempt receives the pod's stop signal (SIGTERM from an eviction, a Kueue preemption,
	// a drain): the worker's ranks get the preemption notice and until its deadline to save
	// a checkpoint, then the worker ends interrupted. Nil: only ctx stops the worker, at once.
	Preempt <-chan string
	// LockWait bounds how long worker 0 waits for the run folder's lock, which the previous
	// attempt's worker 0 may still hold while its pod terminates. 0: the job's grace
	// period plus 30 s.
	LockWait time.Duration
	// PrimaryWait bounds how long a worker waits for worker 0's coordinator to answer (at
	// the start, and again after losing it), and how long the coordinator waits for every
	// worker to connect (before the first attempt, and for a lost worker to come back).
	// 0: LockWait plus the job's process-group timeout (as long as torch's rendezvous
	// would wait for worker 0).
	PrimaryWait time.Duration
	// TempDir is where the Python helper is installed and where the ranks of workers other
	// than 0 make their checkpoint folders (inside the pod). "": os.TempDir().
	TempDir string
}

func (o Options) withDefaults(job *v1.TrainJob) Options {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LockWait == 0 {
		o.LockWait = time.Duration(job.Spec.GracePeriod())*time.Second + lockSlack
	}
	if o.PrimaryWait == 0 {
		o.PrimaryWait = o.LockWait + time.Duration(job.Spec.PGTimeout())*time.Second
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	return o
}

// InputError marks a worker that cannot run as described, however often it is restarted:
// a command or working folder missing from the image, too few GPUs, a run that already
// succeeded. Nothing was started.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *InputError) Unwrap() error { return e.Err }

// worker is one run of Run.
type worker struct {
	cfg     Config
	opts    Options
	job     *v1.TrainJob
	console *logstream.Console
	folder  *rundir.Run
	session *reporting.Session
	scratch string // a secondary's checkpoint scratch folder, in the pod
	res     launcher.AttemptResult
	gang    gangRun
	pre     *preemption
}

// Run runs one worker of the gang as cfg says, for every attempt worker 0's coordinator
// starts on the gang's pods (restarts in place), and returns the summary to leave in the
// termination message. Its Outcome says how the gang ended; the error says why the
// worker's ranks did not start (an *InputError when restarting cannot help), or what
// failed around them (the last checkpoint's commit, the coordinator out of reach), and is
// then also the summary's reason.
func Run(ctx context.Context, cfg Config, opts Options) (workload.Summary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &worker{cfg: cfg, opts: opts.withDefaults(cfg.Job), job: cfg.Job, pre: newPreemption(cancel)}
	if opts.Preempt != nil {
		go w.pre.follow(ctx, opts.Preempt)
	}
	w.console = logstream.NewConsole(w.opts.Out, logstream.Options{})
	err := w.run(ctx)
	if w.session != nil {
		err = errors.Join(err, w.closeSession())
	}
	if w.scratch != "" {
		if rmErr := os.RemoveAll(w.scratch); rmErr != nil {
			w.opts.Logger.Warn("remove the checkpoint scratch folder", "err", rmErr)
		}
	}
	if w.folder != nil && w.primary() && w.res.Outcome != "" {
		err = errors.Join(err, w.record(err))
	}
	sum := w.summary(ctx, err) // reads the run folder the worker opened
	if w.folder != nil {
		w.folder.Close()
	}
	w.console.Close()
	return sum, err
}

func (w *worker) primary() bool { return w.cfg.Worker == 0 }

// run prepares the worker, opens worker 0's run folder and reporting session, and runs
// the gang's attempts.
func (w *worker) run(ctx context.Context) error {
	if err := launcher.Preflight(w.job); err != nil {
		return &InputError{err}
	}
	gpus, err := w.gpus(ctx)
	if err != nil {
		return err
	}
	helper, removeHelper, err := python.Install(python.Options{Dir: w.opts.TempDir, Logger: w.opts.Logger})
	if err != nil {
		return fmt.Errorf("install the Python helper: %w", err)
	}
	defer removeHelper()
	w.gang.extra, w.gang.gpus, w.gang.helper = map[string]string{"PYTHONPATH": helper}, gpus, helper
	if w.primary() {
		if err := w.openPrimary(ctx); err != nil {
			return err
		}
	}
	// Secondaries open the run folder when the coordinator starts their first attempt.
	defer w.serveProgress(w.cfg.ProgressAddr, gpus)()
	return w.runGang(ctx)
}

// gpus returns the first N GPUs this pod sees, N being the job's GPUs per worker.
func (w *worker) gpus(ctx context.Context) ([]device.GPU, error) {
	n := int(w.job.Spec.Resources.GPU)
	if n == 0 {
		return nil, nil
	}
	inv, err := device.Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover GPUs: %w", err)
	}
	visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if inv, err = inv.Visible(visible, set); err != nil {
		return nil, &InputError{fmt.Errorf("CUDA_VISIBLE_DEVICES of trainyard worker: %w", err)}
	}
	sets, err := device.Assign(inv, 1, n)
	if err != nil {
		return nil, &InputError{fmt.Errorf("the job asks for %d GPU(s) per worker but this pod sees %d (%s)",
			n, len(inv.GPUs), inv.Source)}
	}
	return sets[0], nil
}

// openPrimary opens the run folder as its holder, waiting while the previous attempt's
// worker 0 still holds it, and starts the reporting session for worker 0's ranks.
func (w *worker) openPrimary(ctx context.Context) error {
	deadline := time.Now().Add(w.opts.LockWait)
	for waited := false; ; {
		folder, err := rundir.Open(w.job, rundir.Options{WarnStorage: w.warnStorage})
		switch {
		case err == nil:
			w.folder = folder
			return w.startSession(reporting.Options{Ranks: w.ranks()})
		case errors.Is(err, rundir.ErrFinished):
			return &InputError{fmt.Errorf("run %s already succeeded (%s): worker 0 does not run it again; give the TrainJob another spec.runName to start a new run",
				w.job.Spec.RunName, w.runDir())}
		case !errors.Is(err, rundir.ErrBusy):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("run folder %s is still locked after %s: another trainyard worker 0 (a previous attempt's pod that has not stopped?) holds it",
				w.runDir(), w.opts.LockWait.Round(time.Second))
		case !waited:
			waited = true
			w.console.Notice(fmt.Sprintf("run folder %s is locked, probably by the previous attempt's worker 0 while its pod stops; waiting up to %s",
				w.runDir(), w.opts.LockWait.Round(time.Second)))
		}
		if err := pause.For(ctx, lockPoll); err != nil {
			return err
		}
	}
}

// openSecondary opens the run folder as a secondary and starts the reporting session
// for this worker's ranks, once worker 0's coordinator has started the first attempt:
// worker 0 then holds the folder, and the previous attempts' checkpoint commits are over,
// so the checkpoints this worker resumes from are final. Its ranks' checkpoint scratch
// folders go into a private folder in the pod (extra's TRAINYARD_SCRATCH_DIR), so worker 0
// never cleans them and they never fill the storage.
func (w *worker) openSecondary(extra map[string]string) error {
	folder, err := rundir.Open(w.job, rundir.Options{Secondary: true, WarnStorage: w.warnStorage})
	if err != nil {
		return err
	}
	w.folder = folder
	scratch, err := os.MkdirTemp(w.opts.TempDir, "trainyard-scratch-")
	if err != nil {
		return fmt.Errorf("create the checkpoint scratch folder: %w", err)
	}
	w.scratch = scratch
	extra["TRAINYARD_SCRATCH_DIR"] = scratch
	return w.startSession(reporting.Options{Ranks: w.ranks(), Secondary: true})
}

func (w *worker) startSession(opts reporting.Options) error {
	root, err := w.folder.OpenRoot()
	if err != nil {
		return err
	}
	s, err := reporting.StartWith(w.job, root, w.console, w.opts.Logger, opts)
	if err != nil {
		return err
	}
	w.session = s
	return nil
}

// closeSession waits for the checkpoint commit in flight and stops serving reports.
func (w *worker) closeSession() error {
	if err := w.session.Close(); err != nil {
		return fmt.Errorf("run %s: %w", w.job.Spec.RunName, err)
	}
	return nil
}

// ranks returns the global ranks of this worker's processes.
func (w *worker) ranks() []int {
	n := w.job.Spec.ProcCount()
	out := make([]int, n)
	for i := range out {
		out[i] = launcher.RankOf(w.job, w.cfg.Worker, i)
	}
	return out
}

// warnStorage shows why the storage path would be refused by `trainyard run`, and goes
// on: on Kubernetes the storage path is a volume that only the pods given its claim
// mount (a PVC's root is often 0777, or 2775 for an fsGroup), and the workers of a job
// run as one user, so the folder's Unix permissions are not what keeps others out. The
// run folder is still checked before every attempt (rundir.Run.CheckSame), and
// checkpoints of another user are still refused.
func (w *worker) warnStorage(err error) {
	w.console.Notice("warning: " + err.Error() + " (on Kubernetes this is only a warning: " +
		"keep the volume to this job's namespace)")
}

// runDir is the run folder, <storage path>/<run name>.
func (w *worker) runDir() string {
	return filepath.Join(w.job.Spec.StoragePath, w.job.Spec.RunName)
}

// record writes how worker 0's gang ended into run.json. Success finishes the run, and
// so does a failure the coordinator calls final (no restarts left in place); whether
// another failure is the last only the operator knows.
func (w *worker) record(runErr error) error {
	phase := map[launcher.Outcome]v1.JobPhase{launcher.Succeeded: v1.PhaseSucceeded,
		launcher.Failed: v1.PhaseFailed, launcher.Interrupted: v1.PhaseInterrupted}[w.res.Outcome]
	reason := w.reason()
	if runErr != nil {
		phase, reason = v1.PhaseFailed, runErr.Error()
	}
	return w.folder.Update(func(rec *rundir.Record) {
		now := time.Now()
		rec.Phase, rec.Reason, rec.Supervisor = phase, reason, 0
		if w.gang.l != nil && w.gang.l.Preempted() != "" {
			rec.Preemptions++
		}
		if phase == v1.PhaseSucceeded || (phase == v1.PhaseFailed && w.gang.final() != "") {
			rec.Finished = &now
		}
	})
}

// reason says how the gang's last attempt ended on this worker: for a gang that failed,
// what its coordinator said.
func (w *worker) reason() string {
	if r := w.gang.failure(); r != "" {
		return r
	}
	switch w.res.Outcome {
	case launcher.Succeeded:
		if n := w.job.Spec.ProcCount(); n > 1 {
			return fmt.Sprintf("all %d ranks of worker %d exited 0 in attempt %d", n, w.cfg.Worker, w.cfg.Attempt)
		}
		return fmt.Sprintf("the rank of worker %d exited 0 in attempt %d", w.cfg.Worker, w.cfg.Attempt)
	case launcher.Interrupted:
		return fmt.Sprintf("interrupted in attempt %d", w.cfg.Attempt)
	}
	return fmt.Sprintf("%s in attempt %d", w.res.Reason, w.cfg.Attempt)
}

// summary describes the worker's end for the termination message; worker 0's carries the
// run's progress.
func (w *worker) summary(ctx context.Context, err error) workload.Summary {
	sum := workload.Summary{Worker: w.cfg.Worker, Outcome: string(w.res.Outcome), Reason: w.reason()}
	switch {
	case err != nil && w.res.Outcome == "" && ctx.Err() != nil:
		sum.Outcome, sum.Reason = string(launcher.Interrupted), "interrupted before the ranks started: "+err.Error()
	case err != nil:
		sum.Outcome, sum.Reason = string(launcher.Failed), err.Error()
	}
	w.gangSummary(&sum)
	if !w.primary() || w.folder == nil {
		return sum
	}
	sum.RunDir = w.folder.Dir
	if w.session != nil {
		if got := w.session.Summary(); got.Count > 0 {
			sum.Iteration = int64(got.Last.Iteration)
			sum.Metrics = formatMetrics(got.Last.Metrics)
		}
	}
	if root, err := w.folder.OpenRoot(); err == nil {
		if store, err := checkpoint.InspectIn(root); err == nil {
			if infos, err := store.List(); err == nil && len(infos) > 0 {
				sum.Checkpoint = infos[len(infos)-1].Name
			}
			store.Close()
		}
	}
	return sum
}

func formatMetrics(m map[string]float64) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = strconv.FormatFloat(v, 'g', 6, 64)
	}
	return out
}
