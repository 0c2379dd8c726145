package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/podworker"
	"github.com/trainyard/trainyard/internal/workload"
)

// envTerminationLog overrides where the worker writes its summary (tests; a pod leaves it
// unset).
const envTerminationLog = "TRAINYARD_TERMINATION_LOG"

const workerLong = `Run one worker of a TrainJob inside a Kubernetes pod.

This is the entrypoint the Trainyard operator puts in worker pods
(` + workload.BinPath + ` worker); it is not meant to be run by hand. Each pod the
operator makes for an attempt runs one worker of the gang with the same launcher as
'trainyard run'. Worker 0 also coordinates the gang on port 29502: it starts each
attempt once every worker is connected, and when a rank fails (or the gang hangs) it
stops every worker's processes and starts the next attempt on the same pods, from the
latest checkpoint, while the job has restarts left (spec.maxRestarts). A worker whose
pod is lost is waited for (a disruption, not a restart) while the operator replaces
its pod under the same name.

It reads, from the environment:
  TRAINYARD_JOB              the TrainJob as JSON, defaulted, with spec.runName and spec.storagePath
  TRAINYARD_ATTEMPT          the number of the attempt that made the pod, 1-based
  JOB_COMPLETION_INDEX       the worker's index (0 is worker 0; named as in an Indexed Job)
  MASTER_ADDR, MASTER_PORT   worker 0's address and rendezvous port (the same for every attempt)
  TRAINYARD_RESTARTS, TRAINYARD_DISRUPTIONS
                             the run's restarts so far, and how many were disruptions (default 0)
  TRAINYARD_GANG_SECRET      when set (the same in every pod), authenticates the gang's messages
  TRAINYARD_GANG_ADDR        worker 0's coordinator (default MASTER_ADDR:29502)
  TRAINYARD_TERMINATION_LOG  where to write the summary (default ` + workload.TerminationLog + `)

The ranks' lines reach the pod log prefixed with their rank and pid, and are kept in
<storage path>/<run name>/logs/attempt-N/rank-R.log, on the volume the gang's pods share.
Worker 0 holds the run folder (run.json, results, checkpoint commits); the other workers
start each attempt when worker 0's coordinator says so and resume from the same
checkpoint. On SIGTERM (the pod deleted, evicted or preempted) ranks that report through
the trainyard helper get the preemption notice and until its deadline to save a
checkpoint (trainyard.preemption()); then, or at once for ranks that never reported,
they get SIGTERM, then SIGKILL at the end of the job's grace period.
On exit the worker writes a JSON summary (outcome, reason, attempt, restarts; for worker
0 the run's last iteration, metrics, latest checkpoint and folder, and why the gang last
restarted in place; "final" when no restarts are left) to the termination log.

Exit codes: 0 the gang succeeded, 1 it failed, 2 bad input (a variable, a command or
folder missing from the image, too few GPUs, a run that already succeeded: nothing was
started), 130 interrupted.`

func newWorkerCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run one worker of a TrainJob in a Kubernetes pod (the operator's entrypoint)",
		Long:  workerLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), g)
		},
	}
}

func runWorker(ctx context.Context, g *globals) error {
	sig := handleSignals(ctx)
	logPath := workload.TerminationLog
	if p := os.Getenv(envTerminationLog); p != "" {
		logPath = p
	}
	cfg, err := podworker.ParseEnv(os.LookupEnv)
	if err != nil {
		err = fmt.Errorf("worker: bad environment (see 'trainyard worker --help'):\n%w", err)
		leaveSummary(g, logPath, workload.Summary{Worker: cfg.Worker, Outcome: string(launcher.Failed), Reason: err.Error()})
		return usageError(err)
	}
	sum, err := podworker.Run(ctx, cfg, podworker.Options{Out: g.io.Out, Logger: g.logger(), ForceKill: sig.force,
		Preempt: sig.preempt})
	leaveSummary(g, logPath, sum)
	var input *podworker.InputError
	switch {
	case errors.As(err, &input):
		return usageError(err)
	case sum.Outcome == string(launcher.Succeeded) && err == nil:
		if sum.RunDir != "" {
			sum.Reason += "; folder " + sum.RunDir
		}
		fmt.Fprintf(g.io.Out, "trainyard: %s\n", sum.Reason)
		return nil
	case sum.Outcome == string(launcher.Interrupted):
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("worker %d: %s", cfg.Worker, sum.Reason)}
	}
	return &exitError{code: ExitFailed, err: fmt.Errorf("worker %d: %s", cfg.Worker, sum.Reason)}
}

// leaveSummary writes the summary for the operator; failing to is only a warning, as the
// exit code still tells the operator how the worker ended.
func leaveSummary(g *globals, path string, sum workload.Summary) {
	if err := podworker.WriteSummary(path, sum); err != nil {
		fmt.Fprintf(g.io.Err, "trainyard: warning: %v\n", err)
	}
}
