package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/secrets"
	"github.com/trainyard/trainyard/python"
)

const runLong = `Run a training job on this machine, in the foreground.

Every worker process gets the environment torch.distributed and torchrun users expect
(MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
TORCHELASTIC_RESTART_COUNT, ...), and Trainyard's own TRAINYARD_RUN_NAME, TRAINYARD_RUN_DIR
and TRAINYARD_ATTEMPT. This machine is one torchrun node: LOCAL_RANK numbers all the gang's
processes here (0 to LOCAL_WORLD_SIZE-1), NODE_RANK and GROUP_RANK are 0, and
TRAINYARD_WORKER is the worker's index. Every process sees the GPUs of all the gang's
workers through CUDA_VISIBLE_DEVICES, in worker order, so that with one GPU per process
torch.cuda.set_device(LOCAL_RANK) picks its own; TRAINYARD_CUDA_DEVICE names it in any case
(the trainyard helper's get_device() uses it).
Variables given with --env (or the job file's env) win over all of them.
As torchrun's agent does, trainyard hosts the rendezvous store (torch's TCPStore) on
MASTER_PORT before any rank starts and sets TORCHELASTIC_USE_AGENT_STORE=True, so every
rank's env:// rendezvous is a client of it; a script that hosts its own store on
MASTER_PORT needs --env TORCHELASTIC_USE_AGENT_STORE=False (then rank 0 hosts it).

Lines the workers print reach the console prefixed with their rank and pid, and are
kept whole in <storage path>/<run name>/logs/attempt-N/rank-R.log. The run's folder
also holds the resolved job (job.yaml) and the record of every attempt (run.json).
On the console, a line that several ranks print within half a second is folded into
one, "[ranks 1-3] text [repeated 3x across workers]", where that saves lines; each
rank's lines keep their order (a rank's later lines wait behind its folded copy). Turn
folding off with --fold-logs=false or RAY_DEDUP_LOGS=0 (as Ray's), in trainyard's
environment or the job's (--env, the job file's env: a server's job too); --ranks 0,2-3
shows those ranks' lines only (torchrun's --local-ranks-filter). The log files keep
every line either way: the rank logs, and the console's lines, unfolded, in
<storage path>/<run name>/console.log, which 'trainyard logs RUN' prints.

When a worker exits non-zero or dies, every other worker's process group gets
SIGTERM, then SIGKILL after --grace-period; with --max-restarts K the whole gang
starts again, up to K times, on the same rendezvous port, whose store is emptied
first (no key or client of the failed attempt reaches the next). When every rank fails
the same way at its start, before printing or reporting anything (the same exit
code and last line, such as an ImportError, on two ranks or in two attempts in a
row), the gang is not restarted: that is
the script, not a fault (--env TRAINYARD_RESTART_SAME_FAILURE=1 restarts it
anyway). A restart's ranks start
from spares: once a rank has printed something, one more Python per rank imports
torch and waits, so a restart does not import it again (about 120 MB per rank with
torch 1.13 on CPU; --env TRAINYARD_PRESTART=0 turns them off). Spares are for a
command that runs a Python script or module (python3 [-u] train.py, python3 -m pkg).

Ctrl-C, SIGTERM or SIGHUP preempt the run: ranks that report through the trainyard
helper get a preemption notice (trainyard.preemption() returns its deadline, the
grace period less a sixth) to save a checkpoint; once one reported after it is
committed, or at the deadline, the gang is stopped. Ranks that never reported are
stopped at once. A second Ctrl-C kills the gang at once. Running the same command
again continues from the latest checkpoint.

A run's name is its folder. Running a name whose run failed or was interrupted
continues it, from its latest checkpoint; a run that succeeded is refused unless
--resume (continue it from its latest checkpoint: a script that resumes at its last
epoch trains nothing more) or --fresh (start it over, in a new folder; the old one is
moved aside to <name>.<date>-<time>, never deleted). The first line says which:
"continuing run fm from checkpoint_000004", or "starting run fm over; the old folder
is kept at ...". --rerun is --resume's old name (it also starts a run that is not there).

The script a Python command runs (python3 train.py) must exist in the working folder
(--workdir); with --sync-source the workers start in the run folder, so give its path
in the clone, code/<repo>/train.py. A run that fails before its first attempt (a clone
that fails, a script the clone lacks) is recorded Failed with the reason.

Exit codes: 0 the job succeeded, 1 it failed, 2 bad input (nothing was started),
130 interrupted (Ctrl-C, SIGTERM or SIGHUP).`

const runExample = `  trainyard run --workers 2 -- /usr/bin/python3 train.py --epochs 3
  trainyard run --workers 2 --gpus-per-worker 4 --max-restarts 3 -- python3 train.py
  trainyard run -f job.yaml
  trainyard run -f job.yaml --name retry-2 -- python3 train.py --lr 0.01`

// runOptions are the flags of run that are not part of the job.
type runOptions struct {
	// resume continues a run that succeeded (--resume, or --rerun); fresh moves an
	// existing run folder aside and starts the run over (--fresh).
	resume, fresh bool
	rerun         bool // --rerun, the deprecated name of --resume
	// foldLogs is --fold-logs, and foldLogsSet whether it was given.
	foldLogs    bool
	foldLogsSet bool
	ranks       logstream.Ranks // --ranks: every rank when empty
	// gangGiven is whether the user described the gang (--workers, --procs-per-worker or a
	// job file) rather than starting one plain process.
	gangGiven bool
	// startWorkers is --start-workers: an elastic gang starts with that many workers
	// (0: its most); maxWorkers is then its most.
	startWorkers, maxWorkers int
	// standby is --standby: keep the job's Pythons warm for a job server (standby.go).
	standby bool
}

func newRunCommand(g *globals) *cobra.Command {
	var (
		flags jobspec.Flags
		opts  runOptions
		ranks string
	)
	cmd := &cobra.Command{
		Use:     "run [flags] [--] COMMAND [ARGS...]",
		Short:   "Run a training job on this machine, in the foreground",
		Long:    runLong,
		Example: runExample,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			fs := cmd.Flags()
			if fs.Changed("data") {
				return usageError(noDataHere("this machine"))
			}
			opts.gangGiven = flags.File != "" || fs.Changed("workers") || fs.Changed("procs-per-worker")
			opts.foldLogsSet = fs.Changed("fold-logs")
			if err := opts.checkIntent(); err != nil {
				return err
			}
			if opts.ranks, err = logstream.ParseRanks(ranks); err != nil {
				return usageError(fmt.Errorf("--ranks: %w", err))
			}
			if opts.standby {
				return runStandby(cmd.Context(), g, &flags, opts, args)
			}
			return runJob(cmd.Context(), g, &flags, opts, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	flags.Bind(cmd.Flags())
	cmd.Flags().IntVar(&opts.startWorkers, "start-workers", 0,
		"start an elastic gang (--workers MIN:MAX) with this many workers, between MIN and MAX (the job server gives it what fits)")
	cmd.Flags().BoolVar(&opts.resume, "resume", false, "continue the run of this --name from its last checkpoint, even one that succeeded")
	cmd.Flags().BoolVar(&opts.fresh, "fresh", false, "start the run of this --name over; its old folder is moved aside to <name>.<date>-<time>")
	cmd.Flags().BoolVar(&opts.standby, "standby", false, "")
	_ = cmd.Flags().MarkHidden("standby") // a job server's (standby.go)
	cmd.Flags().BoolVar(&opts.rerun, "rerun", false, "")
	_ = cmd.Flags().MarkDeprecated("rerun", "it continues the run from its last checkpoint, as --resume does; --fresh starts it over")
	// A Ray Train driver's: a run of that name continues, wherever it is kept (a bucket
	// included), or starts when there is none, as Ray Train V2 does with a RunConfig name.
	cmd.Flags().BoolVar(&opts.rerun, "resume-if-any", false, "")
	_ = cmd.Flags().MarkHidden("resume-if-any")
	cmd.Flags().BoolVar(&opts.foldLogs, "fold-logs", true,
		"fold a line that several ranks print at about the same time into one, on the console (RAY_DEDUP_LOGS=0: off)")
	cmd.Flags().StringVar(&ranks, "ranks", "", "show only these ranks' lines on the console, such as 0 or 0,2-3 (the logs keep all)")
	// Arena's --data mounts a cluster's volume: taken only to say what to do instead.
	cmd.Flags().StringArray("data", nil, "")
	_ = cmd.Flags().MarkHidden("data")
	groupFlags(cmd,
		flagGroup{"Faults and checkpoints", []string{"max-restarts", "hang-timeout", "pg-timeout", "grace-period",
			"keep-checkpoints", "checkpoint-score", "score-order", "resume", "fresh", "start-workers"}},
		flagGroup{"Code from git", []string{"sync-source", "sync-branch", "sync-rev", "sync-mode"}},
		flagGroup{"Console", []string{"fold-logs", "ranks"}},
	)
	return cmd
}

// noDataHere answers Arena's --data where there is no container to mount into: the
// workers are plain processes on machine.
func noDataHere(machine string) error {
	return fmt.Errorf("--data NAME:PATH mounts a Kubernetes PersistentVolumeClaim into the workers' containers "+
		"(trainyard submit --kube --data); here the workers are plain processes on %s: give your job the data's path directly", machine)
}

func runJob(ctx context.Context, g *globals, flags *jobspec.Flags, opts runOptions, command []string) (err error) {
	if cg, ok, err := clusterGang(); err != nil || ok { // the gang of an in-cluster job server's job (clustergang.go)
		if err != nil {
			return usageError(err)
		}
		return runOnCluster(ctx, g, flags, cg, command)
	}
	adopted, err := launcher.TakeSpares() // this process was a job server's standby
	if err != nil {
		g.logger().Warn("the standby's spares are not used", "err", err)
	}
	sig := handleSignals(ctx)
	hidden, err := takeSecrets()
	if err != nil {
		return usageError(err)
	}
	cloneEnv := append(os.Environ(), secrets.Pairs(hidden)...)
	job, place, release, err := prepare(sig.ctx, g, flags, &opts, command, cloneEnv)
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return err
	case err != nil:
		return usageError(err)
	}
	defer release()
	helper, removeHelper, err := python.Install(python.Options{Logger: g.logger()})
	if err != nil {
		return fmt.Errorf("install the Python helper: %w", err)
	}
	defer removeHelper()
	useBucketEnv(append(slices.Clone(job.Spec.Env), hidden...))
	up, err := startMirror(sig.ctx, g, job, opts)
	if err != nil {
		return err
	}
	defer up.close(g)
	folder, err := openRun(g, job, opts)
	if err != nil {
		return err
	}
	defer folder.Close()
	defer recordUnstarted(sig.ctx, folder, len(folder.Record().Attempts), &err)
	if err := fetchSource(sig.ctx, g, job, folder, cloneEnv); err != nil {
		return err
	}

	extraEnv := driverEnv(job, opts, helper)
	for _, e := range hidden {
		if !secrets.CloneOnly(e.Name) {
			extraEnv[e.Name] = e.Value
		}
	}
	consoleLog, err := openConsoleLog(g, folder)
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	defer consoleLog.Close()
	// One implicit process may be a Ray Train driver whose fit() launches a gang: its
	// console's lines come prefixed already.
	console := logstream.NewConsole(g.io.Out, logstream.Options{Color: isTerminal(g.io.Out),
		PassPrefixed: extraEnv["TRAINYARD_GANG"] == "implicit", Window: foldWindow(job, opts), Ranks: opts.ranks,
		Log: consoleLog.writer()})
	defer console.Close()
	root, err := folder.OpenRoot()
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	up.notifyTo(console)
	session, err := reporting.StartWith(job, root, console, g.logger(), reporting.Options{Upload: up.uploader()})
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	l := &launcher.Launcher{Job: job, Placement: place, Folder: folder, Console: console, Logger: g.logger(),
		ExtraEnv: extraEnv, RayCompat: python.CompatDir(helper),
		AttemptEnv: session.AttemptEnv, ForceKill: sig.force, Preempt: sig.preempt, Notice: session.Notice(),
		MaxWorkers: opts.maxWorkers, Adopted: adopted}
	if job.Spec.MinWorkerCount() < max(job.Spec.WorkerCount(), opts.maxWorkers) {
		l.Resize = followResizes(sig.ctx, job, g.logger())
	}
	session.OnActivity(l.ReportedBy)

	res, err := l.Run(ctx)
	closeErr := errors.Join(session.Close(), up.close(g))
	console.Close()
	if err != nil {
		return &exitError{code: ExitFailed, err: errors.Join(err, closeErr)}
	}
	if rows, skipped, err := reporting.ReadElided(folder.Dir, 20); err == nil && len(rows) > 0 {
		fmt.Fprintln(g.io.Out)
		_ = reporting.WriteElided(g.io.Out, reporting.MarkGone(rows, folder.Dir), skipped)
	}
	if err := report(g, job, folder, res); err != nil || closeErr == nil {
		return err
	}
	return &exitError{code: ExitFailed, err: fmt.Errorf("run %s: %w", job.Spec.RunName, closeErr)}
}

// recordUnstarted records how a run ended that ended with *errp before it started an
// attempt (a clone that failed, a script not in it, a program not found): Failed, or
// Interrupted when ctx was cancelled, with the error as the reason, so that its record
// never stays Pending (or says an earlier end). attempts is how many it had when opened.
func recordUnstarted(ctx context.Context, folder *rundir.Run, attempts int, errp *error) {
	if *errp == nil || len(folder.Record().Attempts) != attempts {
		return
	}
	phase := v1.PhaseFailed
	if ctx.Err() != nil {
		phase = v1.PhaseInterrupted
	}
	reason := "before its first attempt: " + (*errp).Error()
	if attempts > 0 {
		reason = fmt.Sprintf("before attempt %d: %s", attempts+1, (*errp).Error())
	}
	if err := folder.Update(func(rec *rundir.Record) {
		now := time.Now()
		rec.Phase, rec.Reason, rec.Supervisor = phase, reason, 0
		if phase.Finished() {
			rec.Finished = &now
		}
	}); err != nil {
		*errp = errors.Join(*errp, fmt.Errorf("record the run's end: %w", err))
	}
}

// consoleLogFile is the run folder's console log that trainyard run writes; f is nil
// when something else writes it.
type consoleLogFile struct{ f *os.File }

func (l consoleLogFile) writer() io.Writer {
	if l.f == nil {
		return nil
	}
	return l.f
}

func (l consoleLogFile) Close() {
	if l.f != nil {
		l.f.Close()
	}
}

// openConsoleLog opens the run folder's console log (trainyard logs RUN reads it), unless
// this run's output already goes there: a server job's supervisor.
func openConsoleLog(g *globals, folder *rundir.Run) (consoleLogFile, error) {
	f, err := folder.CreateConsoleLog()
	if err != nil {
		return consoleLogFile{}, err
	}
	if out, ok := g.io.Out.(*os.File); ok {
		a, aerr := out.Stat()
		b, berr := f.Stat()
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			f.Close()
			return consoleLogFile{}, nil
		}
	}
	return consoleLogFile{f: f}, nil
}

// checkIntent checks --resume, --fresh and --rerun (which it turns into --resume, but for
// a run that does not exist yet, which --rerun starts as it always did: scripts and
// older Ray drivers pass it for every run).
func (o *runOptions) checkIntent() error {
	if o.rerun {
		o.resume = true
	}
	if o.resume && o.fresh {
		return usageError(errors.New("--resume continues the run from its last checkpoint, --fresh starts it over: give one of them"))
	}
	return nil
}

// openRun opens the job's run folder as opts say: a new run, or an existing one
// continued (refused for a run that succeeded, unless --resume) or started over in a
// new folder (--fresh: the old one moved aside); and says which.
func openRun(g *globals, job *v1.TrainJob, opts runOptions) (*rundir.Run, error) {
	name, dir := job.Spec.RunName, jobspec.RunFolder(&job.Spec)
	var aside string
	switch _, err := os.Lstat(filepath.Join(dir, rundir.RecordFile)); {
	case opts.resume && err != nil && !opts.rerun: // --rerun, as before, also starts a new run
		return nil, usageError(fmt.Errorf("--resume: no run %s in %s to continue; leave --resume out to start it", name, job.Spec.StoragePath))
	case opts.fresh:
		if aside, err = rundir.MoveAside(dir, time.Now()); err != nil {
			return nil, usageError(fmt.Errorf("start run %s over: %w", name, err))
		}
	}
	folder, err := rundir.Open(job, rundir.Options{Rerun: opts.resume})
	if err != nil {
		return nil, usageError(err)
	}
	rec := folder.Record()
	switch {
	case aside != "":
		fmt.Fprintf(g.io.Out, "trainyard: starting run %s over; the old folder is kept at %s\n", name, aside)
	case len(rec.Attempts) > 0:
		next := len(rec.Attempts) + 1
		if cp := latestCheckpoint(folder.Dir); cp != "" {
			fmt.Fprintf(g.io.Out, "trainyard: continuing run %s from %s in attempt %d; --fresh starts it over\n", name, cp, next)
		} else {
			fmt.Fprintf(g.io.Out, "trainyard: continuing run %s in attempt %d, from the beginning: it has no checkpoint\n", name, next)
		}
	}
	return folder, nil
}

// latestCheckpoint names the newest committed checkpoint of a run folder ("" for none).
func latestCheckpoint(dir string) string {
	store, err := checkpoint.Open(dir, nil)
	if err != nil {
		return ""
	}
	defer store.Close()
	infos, err := store.List()
	if err != nil || len(infos) == 0 {
		return ""
	}
	return infos[len(infos)-1].Name
}

// foldWindow is the console's folding window: the default, or -1 (no folding) when
// --fold-logs=false, else when RAY_DEDUP_LOGS, in the job's env or else in trainyard's,
// is set to anything but 1 or true (as Ray reads it).
func foldWindow(job *v1.TrainJob, opts runOptions) time.Duration {
	fold := opts.foldLogs
	if !opts.foldLogsSet {
		v, ok := os.LookupEnv(rayDedupLogs)
		for _, e := range job.Spec.Env {
			if e.Name == rayDedupLogs {
				v, ok = e.Value, true
			}
		}
		fold = !ok || v == "1" || strings.EqualFold(v, "true")
	}
	if fold {
		return 0
	}
	return -1
}

// rayDedupLogs turns off the folding of identical lines, as it does Ray's.
const rayDedupLogs = "RAY_DEDUP_LOGS"

// takeSecrets reads the job's secrets from the file the job server names in
// secrets.EnvFile, if any, and unsets it, so that no process of the job inherits it.
func takeSecrets() ([]v1.EnvVar, error) {
	path, ok := os.LookupEnv(secrets.EnvFile)
	if !ok {
		return nil, nil
	}
	_ = os.Unsetenv(secrets.EnvFile)
	return secrets.ReadFile(path)
}

// fetchSource clones the job's git source into the run folder, once per run, with the
// credentials in env.
func fetchSource(ctx context.Context, g *globals, job *v1.TrainJob, folder *rundir.Run, env []string) error {
	commit, err := launcher.FetchSource(ctx, job, folder, env)
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	if commit != "" {
		fmt.Fprintf(g.io.Out, "trainyard: code from %s at commit %s in %s\n", job.Spec.Source.Git.URL, commit[:12],
			filepath.Join(folder.Dir, "code"))
	}
	return nil
}

// driverEnv returns the variables every process of the run gets from the CLI: the helper
// on PYTHONPATH, and what Ray's TorchTrainer.fit() needs to launch a gang from a plain
// single process (the driver): TRAINYARD_GANG (implicit for one process started without
// --workers, --procs-per-worker or a job file, or whose job file says so (a server's job:
// v1.AnnotationGang), else explicit), TRAINYARD_BINARY (this
// binary) and TRAINYARD_HOST_CUDA_VISIBLE_DEVICES (the GPUs trainyard itself was given).
func driverEnv(job *v1.TrainJob, opts runOptions, helper string) map[string]string {
	env := map[string]string{"PYTHONPATH": helper, "TRAINYARD_GANG": "explicit"}
	if (!opts.gangGiven && job.Spec.WorldSize() == 1) || job.ImplicitGang() {
		env["TRAINYARD_GANG"] = "implicit"
	}
	if self, err := os.Executable(); err == nil {
		env["TRAINYARD_BINARY"] = self
	}
	if visible, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		env["TRAINYARD_HOST_CUDA_VISIBLE_DEVICES"] = visible
	}
	var names []string
	for _, e := range job.Spec.Env {
		if !strings.HasPrefix(e.Name, "TRAINYARD_") {
			names = append(names, e.Name)
		}
	}
	if len(names) > 0 {
		env[EnvJobEnvNames] = strings.Join(names, ",") // what a gang on a cluster passes on (clustergang.go)
	}
	return env
}

// prepare turns flags into a job placed on this machine, checking everything that can be
// checked before anything starts.
// Inside a job of a trainyard server, the gang's resources are leased from the server's
// scheduler first (see leaseGang); release gives them back.
func prepare(ctx context.Context, g *globals, flags *jobspec.Flags, opts *runOptions, command []string, cloneEnv []string) (
	job *v1.TrainJob, place launcher.Placement, release func(), err error) {
	release = func() {}
	if job, err = flags.Resolve(command, jobspec.Env{}); err != nil {
		return nil, place, release, err
	}
	if opts.maxWorkers, err = startWith(job, opts.startWorkers); err != nil {
		return nil, place, release, err
	}
	resolve := launcher.ResolveSource
	if opts.fresh {
		resolve = launcher.ResolveSourceAnew
	}
	if err := resolve(ctx, job, cloneEnv); err != nil {
		return nil, place, release, err
	}
	if err := launcher.Preflight(job); err != nil {
		return nil, place, release, err
	}
	if release, err = leaseGang(ctx, g, job); err != nil {
		return nil, place, func() {}, err
	}
	var inv device.Inventory
	if job.Spec.Resources.GPU > 0 {
		if inv, err = discoverGPUs(ctx); err != nil {
			release()
			return nil, place, func() {}, err
		}
	}
	if place, err = launcher.PlaceLocal(job, inv); err != nil {
		release()
		return nil, place, func() {}, err
	}
	return job, place, release, nil
}

func report(g *globals, job *v1.TrainJob, folder *rundir.Run, res launcher.Result) error {
	took := res.Duration.Round(100 * time.Millisecond)
	switch res.Outcome {
	case launcher.Succeeded:
		fmt.Fprintf(g.io.Out, "trainyard: run %s succeeded in %s (%s); folder %s\n", job.Spec.RunName, took, res.Reason, folder.Dir)
		return nil
	case launcher.Interrupted:
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("run %s %s after %s; folder %s", job.Spec.RunName, res.Reason, took, folder.Dir)}
	}
	return &exitError{code: ExitFailed, err: fmt.Errorf("run %s failed: %s; folder %s", job.Spec.RunName, res.Reason, folder.Dir)}
}

func discoverGPUs(ctx context.Context) (device.Inventory, error) {
	inv, err := device.Discover(ctx)
	if err != nil {
		return inv, fmt.Errorf("discover GPUs: %w", err)
	}
	visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	inv, err = inv.Visible(visible, set)
	if err != nil {
		return inv, fmt.Errorf("CUDA_VISIBLE_DEVICES of trainyard: %w", err)
	}
	return inv, nil
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
