package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
)

// messageWidth is the most of a job's message the list shows; -o wide shows it all.
const messageWidth = 60

func newListCommand(g *globals) *cobra.Command {
	var (
		remote   remoteOptions
		output   string
		statuses []string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List a trainyard server's jobs",
		Long: `List the jobs a trainyard server holds, oldest first: their ID, name, status,
priority, the GPUs they hold, when they were submitted, how long they ran (or have been
running) and why they are in their status (why a pending job waits, why one failed).` + remoteHelp,
		Example: `  trainyard list
  trainyard list --status pending,running
  trainyard list -o wide
  trainyard list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "wide", "json", "yaml"); err != nil {
				return err
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			jobs, err := c.List(cmd.Context(), jobStatuses(statuses)...)
			if err != nil {
				return failed(err)
			}
			if output == "json" || output == "yaml" {
				return printData(g.io.Out, output, jobs)
			}
			return printJobList(newView(g, output), jobs)
		},
	}
	remote.bind(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp("wide", "json", "yaml"))
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "list only jobs in these statuses: pending, running, stopped, succeeded, failed")
	return cmd
}

// jobStatuses converts the --status values; the server refuses unknown ones.
func jobStatuses(names []string) []client.JobStatus {
	out := make([]client.JobStatus, 0, len(names))
	for _, n := range names {
		out = append(out, client.JobStatus(strings.ToUpper(strings.TrimSpace(n))))
	}
	return out
}

// printJobList writes the jobs as a table; -o wide adds each worker's GPU indices and
// the run folder, and does not shorten messages.
func printJobList(v view, jobs []client.Job) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(v.out, "No jobs.")
		return err
	}
	tw := v.table()
	header := "ID\tNAME\tSTATUS\tPRIORITY\tGPUS\tSUBMITTED\tDURATION\tMESSAGE"
	if v.wide {
		header += "\tGPU IDS\tRUN DIR"
	}
	fmt.Fprintln(tw, header)
	for _, j := range jobs {
		fmt.Fprintln(tw, jobRow(v, j))
	}
	return tw.Flush()
}

// jobRow is one job's row of the list.
func jobRow(v view, j client.Job) string {
	gpus := "-"
	if j.StartedAt != nil {
		gpus = fmt.Sprint(gpuCount(j.GPUs))
	}
	status := string(j.Status)
	if j.StopRequested && !client.Ended(j.Status) {
		status += " (stopping)"
	}
	msg := cell(j.Message)
	if !v.wide {
		msg = shorten(msg, messageWidth)
	}
	cols := []string{j.ID, orDash(cell(j.Name)), status, fmt.Sprint(j.Priority), gpus, v.age(j.SubmittedAt),
		v.runTime(j.StartedAt, j.EndedAt), orDash(msg)}
	if v.wide {
		cols = append(cols, orDash(gpuIDs(j.GPUs)), orDash(j.RunDir))
	}
	return strings.Join(cols, "\t")
}
