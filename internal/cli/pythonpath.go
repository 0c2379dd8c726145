package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/python"
)

func newPythonPathCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "python-path",
		Short: "Print the folder to put on PYTHONPATH to import trainyard outside a run",
		Long: `Print the folder that holds the trainyard Python helper, for PYTHONPATH, so that a
script that imports trainyard runs outside Trainyard too: under plain python, torchrun,
an IDE or its own unit tests. The helper is the one embedded in this binary, installed
into your cache folder (~/.cache/trainyard/python-<version>) as trainyard run does.

Outside a run the helper runs stand-alone: get_context() reads torchrun's variables
(RANK, WORLD_SIZE, ...) or says rank 0 of 1, report() prints rank 0's metrics on stderr
and keeps no checkpoint (it says so once), and get_checkpoint() returns None. Under
trainyard run, trainyard puts the helper on PYTHONPATH itself.`,
		Example: `  export PYTHONPATH=$(trainyard python-path)
  python3 train.py
  torchrun --nproc_per_node 2 train.py`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := python.InstallCached(python.Options{Logger: g.logger()})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(g.io.Out, dir)
			return err
		},
	}
}
