package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newDeleteCommand(g *globals) *cobra.Command {
	var remote remoteOptions
	cmd := &cobra.Command{
		Use:     "delete ID",
		Aliases: []string{"rm"},
		Short:   "Delete an ended job from the server",
		Long: `Delete a job that has ended (stopped, succeeded or failed) from a trainyard server:
it no longer appears in 'trainyard list'. Its run folder on the server's machine (logs,
results, checkpoints) stays. A job that has not ended must be stopped first.` + remoteHelp,
		Example: `  trainyard delete raysubmit_XtqM3Lq8hZxwWz2a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
	return cmd
}
