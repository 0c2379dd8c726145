package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/logstream"
)

// logsOptions are the flags of logs.
type logsOptions struct {
	follow bool
	tail   int
	rank   int
	ranks  string // --ranks: keep the console log's lines of these ranks
	// storage is where local runs are found (--storage-path).
	storage string
	// The rest are --kube's.
	attempt    int32
	from       string
	instance   string
	allRanks   bool
	since      string
	sinceTime  string
	timestamps bool
}

func newLogsCommand(g *globals) *cobra.Command {
	var (
		remote remoteOptions
		opts   logsOptions
		kube   kubeOptions
	)
	cmd := &cobra.Command{
		Use:   "logs ID|NAME|RUN",
		Short: "Print a job's or a local run's log",
		Long: `Print the log of a server's job, named by its ID or its name, or of a run of trainyard
run. The server's job comes first: when a server answers and has a job of that name or
ID, its log is printed; else the run of that name in --storage-path (or the run folder
a path names). A name that is both is the server's job: give the run's folder to read
the run's.

By default the console log, every rank's lines prefixed with the rank as trainyard run
prints them (<run folder>/console.log); with --rank R, rank R's own log of the last
attempt; with --ranks 0,2-3, the console log's lines of those ranks (and a folded line
that names one of them) and Trainyard's own. A server job's console log folds a line
that several ranks print at about the same time into one, unless the job's env sets
RAY_DEDUP_LOGS=0 (submit --env RAY_DEDUP_LOGS=0); a local run's keeps every line, as
the rank logs do. Only a log's last 16 MiB are printed. A job that waits for resources
has not started, so it has no log yet: logs says so, and why it waits.

With -f, keep printing as the log grows, until the job or run ends (Ctrl-C stops
following, not the job); a job that waits is followed once it starts, and each reason it
waits for is printed meanwhile (on stderr, as "trainyard: job ID is waiting: needs 2
GPUs, 1 free"). A job's console log is streamed by the server (the WebSocket that 'ray
job logs --follow' reads); a rank's log, and a local run's, are read again every second
or less.` + remoteHelp + kubeHelp + `

On a cluster, as Arena's logs: the log of worker 0's pod of the current attempt (or
--attempt N), container "worker": rank 0's lines (and those of the worker's other local
ranks), each prefixed with its rank as trainyard run prints them. -i (--instance) names
another pod: worker-I for worker I's, or a pod's name ('get --kube' lists them);
--all-ranks prints every worker's pod, merged in time order; --rank R keeps rank R's
lines, from its worker's pod. -t N prints the last N lines, --since 10m those of the last
10 minutes (--since-time, those from an RFC 3339 time on), --timestamps begins each with
the time the kubelet read it. With -f the lines are followed as they come, attempt after
attempt, until the job ends; a pod that -i names is followed until it ends. When the pods
are gone (or the cluster cannot reach their kubelet), the rank logs are read from the
run folder (<run folder>/logs/attempt-N/rank-R.log) if this machine has the job's
storage volume mounted at the same path, or from a copy of the run folder (or of the
storage path) that --from names; they have no timestamps.`,
		Example: `  trainyard logs raysubmit_XtqM3Lq8hZxwWz2a
  trainyard logs -f fashion-mnist
  trainyard logs -f mnist
  trainyard logs -t 20 --rank 1 raysubmit_XtqM3Lq8hZxwWz2a
  trainyard logs --ranks 0,2-3 mnist
  trainyard logs --kube -f mnist
  trainyard logs --kube -i worker-1 --since 10m --timestamps mnist
  trainyard logs --kube --all-ranks -t 100 mnist
  trainyard logs --kube --attempt 1 --rank 3 mnist
  trainyard logs --kube --from /mnt/results mnist`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.tail < 0 || opts.rank < -1 {
				return usageError(errors.New("--tail and --rank must be 0 or more"))
			}
			keep, err := logstream.ParseRanks(opts.ranks)
			if err != nil {
				return usageError(fmt.Errorf("--ranks: %w", err))
			}
			if !keep.All() && opts.rank >= 0 {
				return usageError(errors.New("--rank prints one rank's own log, --ranks keeps ranks' lines of the console log: give one of them"))
			}
			out := logstream.FilterLines(g.io.Out, keep)
			defer out.Close()
			g := &globals{io: IO{In: g.io.In, Out: out, Err: g.io.Err}, logLevel: g.logLevel}
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				if !keep.All() {
					return usageError(errors.New("--ranks is for a server's job or a local run; with --kube, --rank R keeps rank R's lines"))
				}
				lo, err := kubeLogOptions(opts)
				if err != nil {
					return err
				}
				return kubeLogs(cmd.Context(), g, &kube, args[0], lo)
			}
			c, dir, err := findRun(cmd.Context(), g, &remote, args[0], opts.storage)
			switch {
			case err != nil:
				return err
			case c != nil:
				return printLogs(cmd.Context(), g, c, args[0], opts)
			}
			return localLogs(cmd.Context(), g, dir, opts)
		},
	}
	remote.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&opts.follow, "follow", "f", false, "keep printing the log as it grows, until the job ends")
	cmd.Flags().IntVarP(&opts.tail, "tail", "t", 0, "print only the last N lines (0: all)")
	cmd.Flags().IntVar(&opts.rank, "rank", -1, "print this rank's log of the last attempt instead of the console log")
	cmd.Flags().StringVar(&opts.ranks, "ranks", "", "keep only these ranks' lines of the console log, such as 0 or 0,2-3")
	cmd.Flags().StringVar(&opts.storage, "storage-path", jobspec.DefaultStoragePath, "folder that holds local runs, or s3://bucket/prefix (its runs staged on this machine)")
	kube.bind(cmd.Flags())
	cmd.Flags().Int32Var(&opts.attempt, "attempt", 0, "with --kube: print this attempt's logs (default: the current attempt)")
	cmd.Flags().StringVar(&opts.from, "from", "", "with --kube: read the rank logs from this copy of the run folder (or of the storage path)")
	cmd.Flags().StringVarP(&opts.instance, "instance", "i", "", "with --kube: the pod to print, worker-I or a pod's name (default: worker-0)")
	cmd.Flags().BoolVar(&opts.allRanks, "all-ranks", false, "with --kube: print every worker's pod, merged in time order")
	cmd.Flags().StringVar(&opts.since, "since", "", "with --kube: print only the lines newer than this, such as 30s, 10m or 2h")
	cmd.Flags().StringVar(&opts.sinceTime, "since-time", "", "with --kube: print only the lines from this RFC 3339 time on")
	cmd.Flags().BoolVar(&opts.timestamps, "timestamps", false, "with --kube: begin each line with the time the kubelet read it")
	kube.only("attempt", "from", "instance", "all-ranks", "since", "since-time", "timestamps")
	return cmd
}

// printLogs prints the log of the job that ref names once, or follows it.
func printLogs(ctx context.Context, g *globals, c *client.Client, ref string, opts logsOptions) error {
	lo := client.LogOptions{Tail: opts.tail}
	if opts.rank >= 0 {
		lo.Rank = &opts.rank
	}
	if opts.follow {
		return followLogs(ctx, g, c, ref, lo)
	}
	d, err := c.Get(ctx, ref)
	if err != nil {
		return failed(err)
	}
	j := d.Job
	text, err := c.Logs(ctx, j.ID, lo)
	pending := j.Status == client.StatusPending
	if err != nil && !(pending && client.IsNotFound(err)) { // a pending job's rank has no log
		return failed(err)
	}
	if _, err := io.WriteString(g.io.Out, text); err != nil {
		return err
	}
	if !pending {
		return nil
	}
	state := "has not started"
	if text != "" {
		state = "is pending again, not running"
	}
	_, err = fmt.Fprintf(g.io.Err, "trainyard: job %s %s: it %s ('trainyard logs -f %s' prints its log once it starts)\n",
		j.ID, state, waitingReason(j), ref)
	return err
}

// followLogs follows a job's log: once it starts, if it waits, saying why it waits.
func followLogs(ctx context.Context, g *globals, c *client.Client, ref string, lo client.LogOptions) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	j, err := waitToStart(ctx, g, c, ref)
	if err == nil {
		err = c.Follow(ctx, j.ID, g.io.Out, lo)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("stopped following job %s; the job goes on", ref)}
	}
	return failed(err)
}

// waitToStart waits while the job that ref names is pending, printing why it waits each
// time the reason changes, as "trainyard: job ID is waiting: needs 2 GPUs, 1 free", and
// that it started once it has. It returns the job once it is no longer pending.
func waitToStart(ctx context.Context, g *globals, c *client.Client, ref string) (client.Job, error) {
	waited := false
	j, err := c.WaitStarted(ctx, ref, func(j client.Job) {
		waited = true
		fmt.Fprintf(g.io.Err, "trainyard: job %s %s\n", j.ID, waitingReason(j))
	})
	if err == nil && waited && j.StartedAt != nil {
		fmt.Fprintf(g.io.Err, "trainyard: job %s started\n", j.ID)
	}
	return j, err
}

// waitingReason says why a pending job waits, from the scheduler's reason: "is waiting:
// needs 2 GPUs, 1 free", "is waiting behind job llama (priority 5, submitted earlier)".
func waitingReason(j client.Job) string {
	switch {
	case j.Message == "":
		return "is waiting for the scheduler to place it"
	case strings.HasPrefix(j.Message, "waiting"):
		return "is " + j.Message
	}
	return "is waiting: " + j.Message
}
