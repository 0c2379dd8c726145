package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
)

// logsOptions are the flags of logs.
type logsOptions struct {
	follow bool
	tail   int
	rank   int
}

func newLogsCommand(g *globals) *cobra.Command {
	var (
		remote remoteOptions
		opts   logsOptions
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's log",
		Long: `Print a job's log: by default its console log, every rank's lines prefixed with the
rank as trainyard run prints them; with --rank R, rank R's own log of the job's last
attempt. The server sends a log's last 16 MiB at most.

With -f, keep printing as the log grows, until the job ends (Ctrl-C stops following, not
the job). The console log is streamed by the server (the WebSocket that
'ray job logs --follow' reads); a rank's log is read again every second.` + remoteHelp,
		Example: `  trainyard logs raysubmit_XtqM3Lq8hZxwWz2a
  trainyard logs -f raysubmit_XtqM3Lq8hZxwWz2a
  trainyard logs -t 20 --rank 1 raysubmit_XtqM3Lq8hZxwWz2a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.tail < 0 || opts.rank < -1 {
				return usageError(errors.New("--tail and --rank must be 0 or more"))
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			return printLogs(cmd.Context(), g, c, args[0], opts)
		},
	}
	remote.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&opts.follow, "follow", "f", false, "keep printing the log as it grows, until the job ends")
	cmd.Flags().IntVarP(&opts.tail, "tail", "t", 0, "print only the last N lines (0: all)")
	cmd.Flags().IntVar(&opts.rank, "rank", -1, "print this rank's log of the last attempt instead of the console log")
	return cmd
}

// printLogs prints a job's log once, or follows it.
func printLogs(ctx context.Context, g *globals, c *client.Client, id string, opts logsOptions) error {
	lo := client.LogOptions{Tail: opts.tail}
	if opts.rank >= 0 {
		lo.Rank = &opts.rank
	}
	if !opts.follow {
		text, err := c.Logs(ctx, id, lo)
		if err != nil {
			return failed(err)
		}
		_, err = io.WriteString(g.io.Out, text)
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.Follow(ctx, id, g.io.Out, lo)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("stopped following job %s; the job goes on", id)}
	}
	return failed(err)
}
