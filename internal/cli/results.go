package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

func newResultsCommand(g *globals) *cobra.Command {
	var storage, output string
	cmd := &cobra.Command{
		Use:   "results RUN",
		Short: "Print the results of a run: each iteration's metrics, checkpoint and time",
		Long: `Print the result table of a run again: one row per trainyard.report() of rank 0,
with its metrics, the checkpoint it committed, the time of the iteration and the total.
RUN is a run name under --storage-path, or the path of a run's folder.`,
		Example: `  trainyard results fashion-mnist
  trainyard results ~/trainyard_results/fashion-mnist -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usageError(fmt.Errorf("--output %q: must be json or left out", output))
			}
			dir, err := runFolder(args[0], storage)
			if err != nil {
				return usageError(err)
			}
			rows, err := reporting.ReadResults(dir)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(g.io.Out).Encode(rows)
			}
			return reporting.WriteTable(g.io.Out, reporting.MarkGone(rows, dir), 0)
		},
	}
	cmd.Flags().StringVar(&storage, "storage-path", jobspec.DefaultStoragePath, "folder that holds runs")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}

// runFolder finds a run's folder from a name under storage, or a path.
func runFolder(run, storage string) (string, error) {
	candidates := []string{run}
	if !strings.Contains(run, string(filepath.Separator)) {
		home, _ := os.UserHomeDir()
		if rest, ok := strings.CutPrefix(storage, "~"); ok {
			storage = home + rest
		}
		candidates = []string{filepath.Join(storage, run), run}
	}
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, rundir.RecordFile)); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no run " + run + " in " + storage + " (" + rundir.RecordFile + " not found); give a run name or the path of a run's folder")
}
