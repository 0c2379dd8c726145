package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
)

func newStopCommand(g *globals) *cobra.Command {
	var remote remoteOptions
	cmd := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a job",
		Long: `Stop a job of a trainyard server. A pending job is stopped at once. A running job's
gang gets SIGTERM, then SIGKILL after its grace period; the job is STOPPED once every
rank has exited (follow it with 'trainyard get'). Stopping a job that has ended is an
error. The job's run folder (logs, results, checkpoints) stays.` + remoteHelp,
		Example: `  trainyard stop raysubmit_XtqM3Lq8hZxwWz2a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := remote.client()
			if err != nil {
				return err
			}
			j, err := c.Stop(cmd.Context(), args[0])
			if err != nil {
				return failed(err)
			}
			if j.Status == client.StatusStopped {
				_, err = fmt.Fprintf(g.io.Out, "Job %s stopped.\n", j.ID)
				return err
			}
			_, err = fmt.Fprintf(g.io.Out, "Job %s is stopping: its gang got SIGTERM.\n", j.ID)
			return err
		},
	}
	remote.bind(cmd.Flags())
	return cmd
}
