package cli

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/shell"
)

func newGetCommand(g *globals) *cobra.Command {
	var (
		remote remoteOptions
		output string
		kube   kubeOptions
		events bool
	)
	cmd := &cobra.Command{
		Use:     "get ID|NAME",
		Aliases: []string{"describe"},
		Short:   "Show a job: its status, attempts and ranks, last metrics and checkpoints",
		Long: `Show one job of a trainyard server, named by its ID or its name (a job's name is
unique among the server's jobs): its status and why, its restarts and how many times
the server preempted it for a job of higher priority, what it runs and on which GPUs,
each attempt of its gang with the state of every rank (running, exited with a code,
killed by a signal, stopped by trainyard because another rank failed), the last metrics
it reported and its committed checkpoints.

-o json and -o yaml print everything the server knows, the resolved TrainJob included.` + remoteHelp + kubeHelp + `

On a cluster, in the shape of Arena's get: the TrainJob's phase and reason, attempt,
restarts and disruptions, priority (its pods' PriorityClass, or N/A), the training
duration (since its first attempt started), its conditions, the last iteration and
metrics, the latest checkpoint and the run folder; each worker pod of the current attempt,
Arena's instances (its worker index and ranks, phase, container state such as
ImagePullBackOff or OOMKilled, restarts, GPUs, node, IP, age); the GPUs its pods hold of
those it requests ("Allocated/Requested GPUs of Job: 2/2"); and the TrainJob's events.
-e (--events) adds the events of its pods (scheduling, image pulls, evictions), each with
the object it is about. -o yaml prints the TrainJob.`,
		Example: `  trainyard get raysubmit_XtqM3Lq8hZxwWz2a
  trainyard get mnist
  trainyard get raysubmit_XtqM3Lq8hZxwWz2a -o yaml
  trainyard get --kube mnist
  trainyard get --kube -e mnist
  trainyard get --kube -n team-a mnist -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				return kubeGet(cmd.Context(), g, &kube, args[0], output, events)
			}
			if err := checkOutput(output, "json", "yaml"); err != nil {
				return err
			}
			c, err := remote.client()
			if err != nil {
				return err
			}
			d, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return failed(err)
			}
			if output != "" {
				return printData(g.io.Out, output, d)
			}
			return printJobDetail(newView(g, output), d)
		},
	}
	remote.bind(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp("json", "yaml"))
	kube.bind(cmd.Flags())
	cmd.Flags().BoolVarP(&events, "events", "e", false, "with --kube: show the events of the job's pods too, not only the TrainJob's")
	kube.only("events")
	return cmd
}

// printJobDetail writes a job as kubectl describe does: fields, then sections.
func printJobDetail(v view, d client.JobDetail) error {
	tw := v.table()
	for _, f := range jobFields(v, d) {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d.Run != nil {
		for _, a := range d.Run.Attempts {
			if err := printAttempt(v, a); err != nil {
				return err
			}
		}
	}
	if err := printResult(v, d.Results); err != nil {
		return err
	}
	if len(d.Checkpoints) > 0 {
		_, err := fmt.Fprintf(v.out, "\nCheckpoints: %s\n", strings.Join(d.Checkpoints, ", "))
		return err
	}
	return nil
}

// jobFields are the job's name-value lines; those that do not apply are left out.
func jobFields(v view, d client.JobDetail) [][2]string {
	j := d.Job
	status := string(j.Status)
	switch {
	case j.StopRequested && !client.Ended(j.Status):
		status += " (stop requested)"
	case j.Preempting:
		status += " (preempting)"
	}
	fields := [][2]string{{"ID", j.ID}, {"Name", orDash(j.Name)}, {"Status", status}}
	if j.Message != "" {
		fields = append(fields, [2]string{"Message", cell(j.Message)})
	}
	if d.Run != nil && d.Run.Reason != "" && d.Run.Reason != j.Message {
		fields = append(fields, [2]string{"Reason", cell(d.Run.Reason)})
	}
	fields = append(fields, [2]string{"Priority", strconv.Itoa(j.Priority)})
	if j.Restarts > 0 {
		fields = append(fields, [2]string{"Restarts", strconv.Itoa(j.Restarts)})
	}
	if j.Preemptions > 0 || j.Preemption != nil {
		fields = append(fields, [2]string{"Preemptions", preemptions(v, j)})
	}
	if d.Spec != nil {
		fields = append(fields, [2]string{"Command", shell.Join(append(slices.Clone(d.Spec.Spec.Command), d.Spec.Spec.Args...))},
			[2]string{"Workers", gangShape(d.Spec.Spec)})
	}
	if w := elasticWorkers(j); w != "" {
		if j.Resizes > 0 {
			w += fmt.Sprintf(", resized %dx", j.Resizes)
		}
		if r := j.Resizing; r != nil {
			w += fmt.Sprintf(", %s from %d to %d: %s", resizingVerb(r), r.From, r.To, r.Reason)
		}
		fields = append(fields, [2]string{"Elastic", w})
	}
	if gpuCount(j.GPUs) > 0 {
		fields = append(fields, [2]string{"GPUs", gpuIDs(j.GPUs)})
	}
	if g := j.Gang; g != nil {
		fields = append(fields, [2]string{"Gang", g.String()})
	}
	submitted := v.clock(j.SubmittedAt) + " (" + v.age(j.SubmittedAt) + ")"
	if j.SubmittedBy != "" {
		submitted += " by " + cell(j.SubmittedBy)
	}
	fields = append(fields, [2]string{"Submitted", submitted})
	if j.StartedAt != nil {
		fields = append(fields, [2]string{"Started", v.clock(*j.StartedAt)})
	}
	if j.EndedAt != nil {
		fields = append(fields, [2]string{"Ended", v.clock(*j.EndedAt)})
	}
	if j.StartedAt != nil {
		fields = append(fields, [2]string{"Duration", v.runTime(j.StartedAt, j.EndedAt)})
	}
	if d.Spec != nil && d.Spec.Spec.WorkingDir != "" {
		fields = append(fields, [2]string{"Working dir", d.Spec.Spec.WorkingDir})
	}
	if len(j.SecretEnv) > 0 {
		fields = append(fields, [2]string{"Secret env", strings.Join(j.SecretEnv, ", ") + " (kept apart, never shown)"})
	}
	if d.Spec != nil {
		if src, ok := jobspec.GitSource(&d.Spec.Spec); ok {
			commit := ""
			if d.Run != nil {
				commit = d.Run.SourceCommit
			}
			fields = append(fields, [2]string{"Code", src.Describe(commit)})
		}
	}
	fields = append(fields, [2]string{"Run dir", orDash(j.RunDir)})
	if d.Spec != nil && jobspec.InBucket(d.Spec.Spec.StoragePath) {
		fields = append(fields, [2]string{"Kept in", d.Spec.Spec.StoragePath + "/" + d.Spec.Spec.RunName + " (the run dir is its staging folder here)"})
	}
	if d.GangRunDir != "" {
		fields = append(fields, [2]string{"Gang run", d.GangRunDir + " (its TorchTrainer.fit(): the results and checkpoints below)"})
	}
	return fields
}

// preemptions says how many times the server preempted the job, and for which job the
// latest time: "1, the latest for job hi (priority 5) at 2025-03-01 11:00:00".
func preemptions(v view, j client.Job) string {
	out, p := strconv.Itoa(j.Preemptions), j.Preemption
	if p == nil {
		return out
	}
	by := fmt.Sprintf("job %s (priority %d) at %s", p.For, p.ForPriority, v.clock(p.At))
	switch {
	case j.Preempting:
		return out + "; being preempted for " + by + ": its gang stops, then it goes back to the queue"
	case p.Requeued != nil:
		return out + ", the latest for " + by
	default:
		return out + "; preempted for " + by + ", it ended before it stopped"
	}
}

// gangShape describes the workers: how many, with how many processes and GPUs each.
func gangShape(s v1.TrainJobSpec) string {
	out := fmt.Sprintf("%d x %d process", s.WorkerCount(), s.ProcCount())
	if s.MinWorkerCount() < s.WorkerCount() {
		out = fmt.Sprintf("%d:%d x %d process", s.MinWorkerCount(), s.WorkerCount(), s.ProcCount())
	}
	if s.ProcCount() != 1 {
		out += "es"
	}
	if s.Resources.GPU > 0 {
		out += fmt.Sprintf(", %d GPU", s.Resources.GPU)
		if s.Resources.GPU != 1 {
			out += "s"
		}
		out += " each"
	}
	if s.MaxRestarts > 0 {
		out += fmt.Sprintf("; up to %d restarts", s.MaxRestarts)
	}
	return out
}

// printAttempt writes one attempt: a line of its own, then a table of its ranks.
func printAttempt(v view, a client.Attempt) error {
	head := fmt.Sprintf("\nAttempt %d: %s", a.Number, orDash(a.Outcome))
	if a.Outcome == "" {
		head = fmt.Sprintf("\nAttempt %d: running", a.Number)
	}
	if a.Reason != "" && a.Reason != a.Outcome {
		head += " (" + cell(a.Reason) + ")"
	}
	head += fmt.Sprintf(", started %s, ran %s, master %s:%d", v.clock(a.Started), v.runTime(&a.Started, a.Ended), a.MasterAddr, a.MasterPort)
	if _, err := fmt.Fprintln(v.out, head); err != nil {
		return err
	}
	tw := v.table()
	fmt.Fprintln(tw, "  RANK\tWORKER\tLOCAL RANK\tPID\tGPUS\tSTATE")
	for _, r := range a.Ranks {
		pid := "-"
		if r.PID > 0 {
			pid = strconv.Itoa(r.PID)
		}
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%s\t%s\t%s\n", r.Rank, r.Worker, r.LocalRank, pid, orDash(r.GPUs), rankState(r))
	}
	return tw.Flush()
}

// rankState says what became of a rank.
func rankState(r client.Rank) string {
	var s string
	switch {
	case r.Error != "":
		s = "error: " + cell(r.Error)
	case r.Ended == nil:
		return "running"
	case r.Signal != "":
		s = "killed by " + r.Signal
	case r.ExitCode != nil:
		s = fmt.Sprintf("exited %d", *r.ExitCode)
	default:
		s = "ended"
	}
	if r.StoppedByTrainyard {
		s += " (stopped by trainyard)"
	}
	return s
}

// printResult writes the last reported iteration and its metrics, by name.
func printResult(v view, r *client.Result) error {
	if r == nil {
		return nil
	}
	head := fmt.Sprintf("\nLast result: iteration %d of attempt %d, %s", r.Iteration, r.Attempt, v.clock(r.Timestamp))
	if r.Checkpoint != "" {
		head += ", checkpoint " + r.Checkpoint
	}
	if _, err := fmt.Fprintln(v.out, head); err != nil {
		return err
	}
	tw := v.table()
	fmt.Fprintln(tw, "  METRIC\tVALUE")
	names := make([]string, 0, len(r.Metrics))
	for name := range r.Metrics {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", cell(name), formatMetric(r.Metrics[name]))
	}
	return tw.Flush()
}

// formatMetric writes a metric with up to 6 significant digits.
func formatMetric(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(x, 'g', 6, 64)
}
