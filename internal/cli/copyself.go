package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/podworker"
	"github.com/trainyard/trainyard/internal/workload"
)

func newCopySelfCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "copy-self DIR",
		Short: "Copy this trainyard binary to DIR/trainyard (the operator's init container)",
		Long: `Copy the running trainyard binary to DIR/trainyard, mode 0755, atomically.

The operator's init container runs it (trainyard copy-self ` + workload.BinDir + `) to put the
static binary into an emptyDir the worker container starts from: the operator's image has
no shell and no cp.`,
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := podworker.CopySelf(args[0])
			if err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			fmt.Fprintf(g.io.Out, "trainyard: copied to %s\n", path)
			return nil
		},
	}
}
