package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
)

const submitLong = `Submit a training job to a trainyard server, then print its log until it ends, as
'ray job submit' does: trainyard exits 0 when the job succeeded and 1 when it failed or
was stopped. With --no-wait it prints the job's ID and returns at once. Ctrl-C stops
printing the log; the job goes on ('trainyard stop ID' stops it).

The job is described by the same flags and job file as 'trainyard run' (see its help),
and checked here before it is sent. The server runs it when its GPUs, CPU and memory
are free, higher --priority first, under its own 'trainyard run', so it behaves as one
run by hand and outlives the server.

Paths are paths on the server's machine. The workers start in --workdir, by default
the folder submit runs in, which must exist there too: the common case is a server on
this machine. The run's folder is <storage path>/<job ID>, where the storage path is
the server's --storage-path unless the job names one; --name names the job (the NAME
that 'trainyard list' shows), and --id chooses its ID.` + remoteHelp

const submitExample = `  trainyard submit -- python3 train.py --epochs 3
  trainyard submit --workers 2 --gpus-per-worker 4 --max-restarts 3 -- python3 train.py
  trainyard submit -f job.yaml --priority 10 --no-wait
  ID=$(trainyard submit --no-wait -- python3 train.py) && trainyard logs -f "$ID"`

// submitOptions are the flags of submit that are not part of the job.
type submitOptions struct {
	id       string
	priority int
	noWait   bool
}

func newSubmitCommand(g *globals) *cobra.Command {
	var (
		flags  jobspec.Flags
		remote remoteOptions
		opts   submitOptions
	)
	cmd := &cobra.Command{
		Use:     "submit [flags] [--] COMMAND [ARGS...]",
		Short:   "Submit a training job to a trainyard server and print its log until it ends",
		Long:    submitLong,
		Example: submitExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return submitJob(cmd.Context(), g, &flags, &remote, opts, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	flags.Bind(cmd.Flags())
	remote.bind(cmd.Flags())
	cmd.Flags().StringVar(&opts.id, "id", "", "the job's ID (default: generated, raysubmit_...)")
	cmd.Flags().IntVar(&opts.priority, "priority", 0, "pending jobs start highest priority first")
	cmd.Flags().BoolVar(&opts.noWait, "no-wait", false, "print the job's ID and return without waiting for the job")
	return cmd
}

// submitJob builds the job from the flags, submits it, and waits for it unless told not
// to.
func submitJob(ctx context.Context, g *globals, flags *jobspec.Flags, remote *remoteOptions, opts submitOptions, command []string) error {
	job, err := remoteJob(flags, command)
	if err != nil {
		return usageError(err)
	}
	c, err := remote.client()
	if err != nil {
		return err
	}
	j, err := c.Submit(ctx, client.SubmitRequest{ID: opts.id, Job: job, Priority: opts.priority})
	if err != nil {
		return failed(err)
	}
	if opts.noWait {
		_, err := fmt.Fprintln(g.io.Out, j.ID)
		return err
	}
	fmt.Fprintf(g.io.Err, "trainyard: submitted job %s; printing its log until it ends (Ctrl-C stops printing, not the job)\n", j.ID)
	return waitForJob(ctx, g, c, j.ID)
}

// remoteJob builds, defaults and validates the job as run does. The storage path is left
// to the server unless the user named one, and the run is named by the server after the
// job's ID.
func remoteJob(flags *jobspec.Flags, command []string) (*v1.TrainJob, error) {
	given, err := flags.Job(command)
	if err != nil {
		return nil, err
	}
	job, err := flags.Resolve(command, jobspec.Env{})
	if err != nil {
		return nil, err
	}
	if given.Spec.StoragePath == "" {
		job.Spec.StoragePath = ""
	}
	job.Spec.RunName = ""
	return job, nil
}

// waitForJob prints the job's log until it ends and returns how it ended: nil when it
// succeeded, an exit code 1 error otherwise, 130 when interrupted.
func waitForJob(ctx context.Context, g *globals, c *client.Client, id string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.Follow(ctx, id, g.io.Out, client.LogOptions{})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &exitError{code: ExitInterrupted, err: fmt.Errorf(
			"stopped printing the log of job %s, which goes on: 'trainyard logs -f %s' prints it again, 'trainyard stop %s' stops it", id, id, id)}
	}
	if err != nil {
		return failed(err)
	}
	d, err := c.Get(ctx, id)
	if err != nil {
		return failed(err)
	}
	return jobOutcome(g, d.Job)
}

// jobOutcome says how an ended job went: nil when it succeeded.
func jobOutcome(g *globals, j client.Job) error {
	how := strings.ToLower(string(j.Status))
	if j.Message != "" {
		how += ": " + j.Message
	}
	if j.Status == client.StatusSucceeded {
		_, err := fmt.Fprintf(g.io.Err, "trainyard: job %s %s\n", j.ID, how)
		return err
	}
	return &exitError{code: ExitFailed, err: fmt.Errorf("job %s %s", j.ID, how)}
}
