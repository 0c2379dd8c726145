package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/units"
)

// messageWidth is the most of a job's message the list shows; -o wide shows it all.
const messageWidth = 60

func newListCommand(g *globals) *cobra.Command {
	var (
		remote   remoteOptions
		output   string
		statuses []string
		kube     kubeOptions
		all      bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List a trainyard server's jobs, or a cluster's TrainJobs (--kube)",
		Long: `List the jobs a trainyard server holds, oldest first: their ID, name, status,
priority, the GPUs and CPUs each holds (or waits for, or held) as workers x per worker,
such as 2x1 for two workers of one GPU each, when they were submitted, how long they ran
(or have been running) and why they are in their status (why a pending job waits, why one
failed). A job that the server preempted for a job of higher priority shows it in its
status: RUNNING (preempting) while its gang stops, then how many times, as in PENDING
(preempted 1x), with the job it made room for in its message. A job submitted without
--cpus-per-worker holds the server's default share (see 'trainyard submit --help').
-o wide adds each worker's memory, GPU indices and the run folder.` + remoteHelp + kubeHelp + `

On a cluster: each TrainJob's name, phase, workers ready of all, GPUs (workers x GPUs
per worker), restarts (with how many were disruptions: evictions, preemptions), age, node
(of worker 0's pod, rank 0's, as Arena's NODE is its chief's; N/A while it has none) and
reason; -A lists every namespace's, --status filters by phase (pending, running,
restarting, succeeded, failed, interrupted, suspended; stopped means suspended), and
-o wide adds the attempt and the last iteration.`,
		Example: `  trainyard list
  trainyard list --status pending,running
  trainyard list -o wide
  trainyard list -o json
  trainyard list --kube
  trainyard list --kube -A --status running -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				return kubeList(cmd.Context(), g, &kube, all, statuses, output)
			}
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
	kube.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "with --kube: the TrainJobs of every namespace")
	kube.only("all-namespaces")
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

// printJobList writes the jobs as a table; -o wide adds each worker's memory, its GPU
// indices and the run folder, and does not shorten messages.
func printJobList(v view, jobs []client.Job) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(v.out, "No jobs.")
		return err
	}
	tw := v.table()
	header := "ID\tNAME\tSTATUS\tPRIORITY\tGPUS\tCPUS\tSUBMITTED\tDURATION\tMESSAGE"
	if v.wide {
		header += "\tMEMORY\tGPU IDS\tRUN DIR"
	}
	fmt.Fprintln(tw, header)
	for _, j := range jobs {
		fmt.Fprintln(tw, jobRow(v, j))
	}
	return tw.Flush()
}

// jobRow is one job's row of the list.
func jobRow(v view, j client.Job) string {
	gpus, cpus, memory := jobHolds(j)
	status := listStatus(j)
	msg := cell(j.Message)
	if !v.wide {
		msg = shorten(msg, messageWidth)
	}
	cols := []string{j.ID, orDash(cell(j.Name)), status, fmt.Sprint(j.Priority), gpus, cpus, v.age(j.SubmittedAt),
		v.runTime(j.StartedAt, j.EndedAt), orDash(msg)}
	if v.wide {
		ids := gpuIDs(j.GPUs)
		if g := j.Gang; g != nil && gpuCount(g.GPUs) > 0 {
			ids = strings.TrimSpace(ids + " gang " + gpuIDs(g.GPUs))
		}
		cols = append(cols, memory, orDash(ids), orDash(j.RunDir))
	}
	return strings.Join(cols, "\t")
}

// listStatus is a job's status with what is under way or what happened to it: "RUNNING
// (stopping)" (a user's stop wins over a preemption), "RUNNING (preempting)" while the
// server preempts it, or how many times it was preempted, "PENDING (preempted 1x)".
func listStatus(j client.Job) string {
	status := string(j.Status)
	switch {
	case j.StopRequested && !client.Ended(j.Status):
		status += " (stopping)"
	case j.Preempting:
		status += " (preempting)"
	case j.Preemptions > 0:
		status += fmt.Sprintf(" (preempted %dx)", j.Preemptions)
	case j.Resizing != nil:
		status += fmt.Sprintf(" (%s %d->%d)", resizingVerb(j.Resizing), j.Resizing.From, j.Resizing.To)
	}
	return status
}

// resizingVerb says "growing" or "shrinking".
func resizingVerb(r *client.Resizing) string {
	if r.To > r.From {
		return "growing"
	}
	return "shrinking"
}

// elasticWorkers says an elastic gang's size: "3 (2:4)"; "" for a gang that is not
// elastic.
func elasticWorkers(j client.Job) string {
	if j.MinWorkers == 0 {
		return ""
	}
	return fmt.Sprintf("%d (%d:%d)", j.Workers, j.MinWorkers, j.MaxWorkers)
}

// jobHolds writes what a job's workers hold as workers x per worker: its GPUs ("2x1"),
// CPUs ("2x4", "1x0.5") and memory ("2x8Gi"); "-" for what they ask none of; with the
// gang its process leased (see withGang). A server
// that does not say (before trainyard told) gives the GPUs held in all, once started.
func jobHolds(j client.Job) (gpus, cpus, memory string) {
	r := j.Resources
	if r == nil {
		gpus = "-"
		if j.StartedAt != nil {
			gpus = fmt.Sprint(gpuCount(j.GPUs))
		}
		return gpus, "-", "-"
	}
	each := func(per string) string {
		if per == "" {
			return "-"
		}
		if j.MinWorkers > 0 && j.StartedAt == nil {
			return fmt.Sprintf("%d-%dx%s", j.MinWorkers, j.MaxWorkers, per) // waits for any size in between
		}
		return fmt.Sprintf("%dx%s", j.Workers, per)
	}
	if r.GPU > 0 {
		gpus = fmt.Sprint(r.GPU)
	}
	if r.CPU != nil && !r.CPU.IsZero() {
		cpus = units.Cores(r.CPU.MilliValue())
	}
	if r.Memory != nil && !r.Memory.IsZero() {
		memory = units.BytesIEC(r.Memory.Value())
	}
	if g := j.Gang; g != nil {
		return withGang(each(gpus), g)
	}
	return each(gpus), each(cpus), each(memory)
}

// withGang writes what a job holds with the gang its process leased: its own GPUs and
// the gang's ("2x1 gang", "1x1 + 2x1 gang"); its CPU and memory are lent to the gang.
func withGang(own string, g *client.Gang) (gpus, cpus, memory string) {
	part := func(per string) string {
		if per == "" {
			return "-"
		}
		return fmt.Sprintf("%dx%s gang", g.Workers, per)
	}
	var gpu, cpu, mem string
	if g.GPUsPerWorker > 0 {
		gpu = fmt.Sprint(g.GPUsPerWorker)
	}
	if g.MilliCPUPerWorker > 0 {
		cpu = units.Cores(g.MilliCPUPerWorker)
	}
	if g.MemoryBytesPerWorker > 0 {
		mem = units.BytesIEC(g.MemoryBytesPerWorker)
	}
	gpus = part(gpu)
	if own != "-" {
		gpus = own + " + " + gpus
	}
	return gpus, part(cpu), part(mem)
}
