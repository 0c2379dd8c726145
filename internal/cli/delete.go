package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newDeleteCommand(g *globals) *cobra.Command {
	var (
		remote  remoteOptions
		kube    kubeOptions
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:     "delete ID|NAME",
		Aliases: []string{"rm"},
		Short:   "Delete an ended job from the server, or a TrainJob (--kube)",
		Long: `Delete a job that has ended (stopped, succeeded or failed) from a trainyard server,
named by its ID or its name: it no longer appears in 'trainyard list', and its name is
free for another job. Its run folder on the server's machine (logs, results, checkpoints)
stays. A job that has not ended must be stopped first.` + remoteHelp + kubeHelp + `

On a cluster, delete deletes the TrainJob, running or not, as kubectl delete does: its
attempts' Jobs, Services and pods are its dependents and go with it, in the background
(the garbage collector deletes them), or first with --wait, which returns once they and
the TrainJob are gone (at most --timeout). The run folder on the storage volume stays.`,
		Example: `  trainyard delete raysubmit_XtqM3Lq8hZxwWz2a
  trainyard delete mnist
  trainyard delete --kube mnist
  trainyard delete --kube --wait mnist`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				return kubeDelete(cmd.Context(), g, &kube, args[0], wait, timeout)
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), args[0]); err != nil {
				return failed(err)
			}
			_, err = fmt.Fprintf(g.io.Out, "Job %s deleted.\n", args[0])
			return err
		},
	}
	remote.bind(cmd.Flags())
	kube.bind(cmd.Flags())
	cmd.Flags().BoolVar(&wait, "wait", false, "with --kube: delete the pods first and return once the TrainJob is gone")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "with --kube --wait: give up waiting after this long")
	kube.only("wait", "timeout")
	return cmd
}
