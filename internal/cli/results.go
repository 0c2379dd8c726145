package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

// lastMetricsWidth is the most of a run's last metrics the list of runs shows.
const lastMetricsWidth = 60

func newResultsCommand(g *globals) *cobra.Command {
	var (
		storage, output string
		remote          remoteOptions
	)
	cmd := &cobra.Command{
		Use:   "results [RUN|JOB]",
		Short: "List the runs in the storage path, or print the results of one",
		Long: `Without RUN, list the runs under --storage-path, oldest first: each run's name, status
(from its run.json), its restarts after failures, how long its attempts ran (not the
time it waited between a stop and its continuation), the metrics of its last
trainyard.report() and its age.

With RUN, print the result table of that run again: one row per trainyard.report() of
rank 0, with its metrics, the checkpoint it committed, the time of the iteration and the
total. RUN is a run name under --storage-path, or the path of a run's folder. The run
comes first: when there is no run of that name, a server's job of that name or ID is
looked for (--address, else $TRAINYARD_ADDRESS, else http://127.0.0.1:8265, as logs
finds it): its run folder when this machine has it, else the results the server sends.
A run or job that is not found exits 1.`,
		Example: `  trainyard results
  trainyard results fashion-mnist
  trainyard results ~/trainyard_results/fashion-mnist -o json
  trainyard results my-server-job`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output, "json"); err != nil {
				return err
			}
			if len(args) == 0 {
				dir, err := storageFolder(storage)
				if err != nil {
					return usageError(fmt.Errorf("--storage-path: %w", err))
				}
				return listRuns(g, dir, output)
			}
			c, dir, err := findRun(cmd.Context(), g, &remote, args[0], storage)
			switch {
			case err != nil:
				return err
			case c != nil:
				return jobResults(cmd.Context(), g, c, args[0], output)
			}
			return printResults(g, dir, output)
		},
	}
	cmd.Flags().StringVar(&storage, "storage-path", jobspec.DefaultStoragePath, "folder that holds runs, or s3://bucket/prefix (its runs staged on this machine)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: a table)")
	remote.bind(cmd.Flags())
	return cmd
}

// printResults prints the results of the run folder dir: a table, or JSON.
func printResults(g *globals, dir, output string) error {
	dir = rundir.ResultsDir(dir) // a Ray Train driver's run: its gang's
	rows, err := reporting.ReadResults(dir)
	if err != nil {
		return err
	}
	if output == "json" {
		return json.NewEncoder(g.io.Out).Encode(resultsJSON(rows))
	}
	return reporting.WriteTable(g.io.Out, reporting.MarkGone(rows, dir), 0)
}

// jobResults prints the results of the server's job that ref names (findRun): from its
// run folder when this machine has it, else as the server sends them.
func jobResults(ctx context.Context, g *globals, c *client.Client, ref, output string) error {
	d, err := c.Get(ctx, ref)
	if err != nil {
		return failed(err)
	}
	if _, err := os.Stat(filepath.Join(d.Job.RunDir, rundir.RecordFile)); d.Job.RunDir != "" && err == nil {
		return printResults(g, d.Job.RunDir, output)
	}
	list, err := c.Results(ctx, d.Job.ID, client.ResultOptions{})
	if err != nil {
		return failed(err)
	}
	if output == "json" {
		return json.NewEncoder(g.io.Out).Encode(list.Results)
	}
	rows := make([]reporting.Result, len(list.Results))
	for i, r := range list.Results {
		rows[i] = reporting.Result{Iteration: r.Iteration, Timestamp: r.Timestamp, TimeThisIterS: r.TimeThisIterS,
			TimeTotalS: r.TimeTotalS, Attempt: r.Attempt, Checkpoint: r.Checkpoint, Metrics: map[string]float64(r.Metrics)}
	}
	return reporting.WriteTable(g.io.Out, rows, 0)
}

// runFolder finds a run's folder from a name under storage, or a path. Under a bucket
// (s3://), a run this machine has not staged is pulled from it first (its record, results
// and logs).
func runFolder(run, storage string) (string, error) {
	if jobspec.InBucket(storage) && !strings.Contains(run, string(filepath.Separator)) {
		if err := pullRun(storage, run); err != nil {
			return "", err
		}
	}
	candidates := []string{run}
	if !strings.Contains(run, string(filepath.Separator)) {
		if abs, err := storageFolder(storage); err == nil {
			storage = abs
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

// runSummary is one run in the list of runs, as results -o json prints it.
type runSummary struct {
	Name     string      `json:"name"`
	Status   v1.JobPhase `json:"status"`
	Reason   string      `json:"reason,omitempty"`
	Created  time.Time   `json:"created"`
	Updated  time.Time   `json:"updated"`
	Finished *time.Time  `json:"finished,omitempty"`
	// Attempts counts the gang's starts; Restarts the restarts after failures among
	// them, Preemptions the stops for preemptions.
	Attempts    int `json:"attempts"`
	Restarts    int `json:"restarts"`
	Preemptions int `json:"preemptions,omitempty"`
	// DurationSeconds is how long the run's attempts ran (rundir.Record.RunningTime).
	DurationSeconds float64 `json:"durationSeconds"`
	// LastResult is the run's last report (as trainyard get -o json shows it); nil when
	// it has none.
	LastResult *client.Result `json:"lastResult,omitempty"`
	Dir        string         `json:"dir"`
	// Error says why the run's record or results could not be read.
	Error string `json:"error,omitempty"`
}

// listRuns prints the runs in storage: a table, or JSON.
func listRuns(g *globals, storage, output string) error {
	runs, err := readRuns(storage)
	if err != nil {
		return err
	}
	if output == "json" {
		return printData(g.io.Out, output, runs)
	}
	return printRuns(newView(g, output), storage, runs)
}

// readRuns reads the summary of every run folder in storage (a folder with a run.json;
// links are not followed), oldest first. A storage path that does not exist holds no
// runs.
func readRuns(storage string) ([]runSummary, error) {
	entries, err := os.ReadDir(storage)
	if errors.Is(err, fs.ErrNotExist) {
		return []runSummary{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the runs in %s: %w", storage, err)
	}
	runs := []runSummary{}
	for _, e := range entries {
		dir := filepath.Join(storage, e.Name())
		if !e.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, rundir.RecordFile)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		runs = append(runs, summarize(dir))
	}
	slices.SortStableFunc(runs, func(a, b runSummary) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name))
	})
	return runs, nil
}

// summarize reads what the list of runs shows of one run folder.
func summarize(dir string) runSummary {
	s := runSummary{Name: filepath.Base(dir), Dir: dir}
	rec, err := rundir.Observe(dir) // a run whose launcher died shows interrupted
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Status, s.Reason, s.Created, s.Updated, s.Finished = rec.Phase, rec.Reason, rec.Created, rec.Updated, rec.Finished
	s.Attempts, s.Restarts, s.Preemptions = len(rec.Attempts), rec.Restarts(), rec.Preemptions
	s.DurationSeconds = rec.RunningTime(time.Now()).Round(time.Millisecond).Seconds()
	last, ok, err := reporting.LastResult(rundir.ResultsDir(dir))
	switch {
	case err != nil:
		s.Error = err.Error()
	case ok:
		r := resultJSON(last)
		s.LastResult = &r
	}
	return s
}

// resultJSON converts a row of result.json (Ray Train's names) to what -o json prints
// (camelCase, as trainyard get -o json shows a job's last result).
func resultJSON(r reporting.Result) client.Result {
	return client.Result{Iteration: r.Iteration, Timestamp: r.Timestamp, TimeThisIterS: r.TimeThisIterS,
		TimeTotalS: r.TimeTotalS, Attempt: r.Attempt, Checkpoint: r.Checkpoint, Metrics: client.Metrics(r.Metrics)}
}

// resultsJSON converts the rows of result.json for -o json; none is [].
func resultsJSON(rows []reporting.Result) []client.Result {
	out := make([]client.Result, len(rows))
	for i, r := range rows {
		out[i] = resultJSON(r)
	}
	return out
}

// printRuns writes the runs as a table.
func printRuns(v view, storage string, runs []runSummary) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintf(v.out, "No runs in %s.\n", storage)
		return err
	}
	tw := v.table()
	fmt.Fprintln(tw, "NAME\tSTATUS\tRESTARTS\tDURATION\tLAST METRICS\tAGE")
	for _, r := range runs {
		status, metrics, age, ran, restarts := string(r.Status), "-", "-", "-", "-"
		switch {
		case r.Error != "" && r.Status == "":
			status, metrics = "unknown", r.Error
		case r.LastResult != nil:
			metrics = lastMetrics(r.LastResult)
		}
		if !r.Created.IsZero() {
			age = humanDuration(v.now.Sub(r.Created))
		}
		if r.Attempts > 0 {
			ran = humanDuration(time.Duration(r.DurationSeconds * float64(time.Second)))
			restarts = strconv.Itoa(r.Restarts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(r.Name), orDash(status), restarts, ran,
			shorten(cell(metrics), lastMetricsWidth), age)
	}
	return tw.Flush()
}

// lastMetrics writes a report's iteration and metrics, by name: "iter 12: acc=0.91 loss=0.23".
func lastMetrics(r *client.Result) string {
	parts := []string{fmt.Sprintf("iter %d:", r.Iteration)}
	for _, name := range slices.Sorted(maps.Keys(r.Metrics)) {
		parts = append(parts, name+"="+strconv.FormatFloat(r.Metrics[name], 'g', 4, 64))
	}
	if len(r.Metrics) == 0 {
		parts[0] = fmt.Sprintf("iter %d", r.Iteration)
	}
	return strings.Join(parts, " ")
}
