package cli

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
)

func newStopCommand(g *globals) *cobra.Command {
	var (
		remote remoteOptions
		kube   kubeOptions
	)
	cmd := &cobra.Command{
		Use:   "stop ID|NAME",
		Short: "Stop a job",
		Long: `Stop a job of a trainyard server, named by its ID or its name. A pending job is
stopped at once. A running job's gang gets SIGTERM, then SIGKILL after its grace period;
the job is STOPPED once every rank has exited (follow it with 'trainyard get'). Stopping
a job that has already ended does nothing and says how it ended. The job's run folder
(logs, results, checkpoints) stays.` + remoteHelp + kubeHelp + `

On a cluster, stop suspends the TrainJob (spec.suspend: true): the operator stops its
running attempt the same way, and starts none while it is suspended. Setting
spec.suspend back to false resumes it: a new attempt starts from the latest checkpoint
(stop prints the kubectl command).`,
		Example: `  trainyard stop raysubmit_XtqM3Lq8hZxwWz2a
  trainyard stop mnist
  trainyard stop --kube mnist`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				return kubeStop(cmd.Context(), g, &kube, args[0])
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			j, err := c.Stop(cmd.Context(), args[0])
			var refused *client.APIError
			if errors.As(err, &refused) && refused.Status == http.StatusConflict {
				// Already ended: stop is done, as kill of a process that exited is.
				if ended, getErr := c.Get(cmd.Context(), args[0]); getErr == nil && ended.Job.EndedAt != nil {
					_, err = fmt.Fprintf(g.io.Out, "Job %s had already ended (%s); nothing to stop.\n", ended.Job.ID, ended.Job.Status)
					return err
				}
			}
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
	kube.bind(cmd.Flags())
	return cmd
}
