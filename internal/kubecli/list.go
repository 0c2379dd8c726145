package kubecli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// reasonWidth is the most of a job's reason list shows; -o wide shows it all.
const reasonWidth = 60

// phases are the phases --status takes, lower-cased.
var phases = []v1.JobPhase{v1.PhasePending, v1.PhaseRunning, v1.PhaseRestarting, v1.PhaseSucceeded,
	v1.PhaseFailed, v1.PhaseInterrupted, v1.PhaseSuspended}

// ParsePhases converts --status values (any case) to phases; "stopped" is Suspended,
// what 'trainyard stop --kube' leads to.
func ParsePhases(names []string) ([]v1.JobPhase, error) {
	var out []v1.JobPhase
	for _, n := range names {
		n = strings.TrimSpace(n)
		if strings.EqualFold(n, "stopped") {
			n = string(v1.PhaseSuspended)
		}
		i := slices.IndexFunc(phases, func(p v1.JobPhase) bool { return strings.EqualFold(string(p), n) })
		if i < 0 {
			names := make([]string, len(phases))
			for j, p := range phases {
				names[j] = strings.ToLower(string(p))
			}
			return nil, inputError("--status %q: use %s", n, strings.Join(names, ", "))
		}
		out = append(out, phases[i])
	}
	return out, nil
}

// ListJobs returns the TrainJobs of the cluster's namespace, or of every namespace, in
// the given phases (all when none), oldest first.
func (c *Cluster) ListJobs(ctx context.Context, allNamespaces bool, only ...v1.JobPhase) ([]v1.TrainJob, error) {
	ns := c.Namespace
	if allNamespaces {
		ns = ""
	}
	jobs, err := c.Jobs.List(ctx, ns)
	if err != nil {
		return nil, c.listError(err)
	}
	if len(only) > 0 {
		jobs = slices.DeleteFunc(jobs, func(j v1.TrainJob) bool { return !slices.Contains(only, j.Status.Phase) })
	}
	slices.SortStableFunc(jobs, func(a, b v1.TrainJob) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return jobs, nil
}

// JobList is jobs as a TrainJobList, as kubectl prints a list.
func JobList(jobs []v1.TrainJob) *v1.TrainJobList {
	list := &v1.TrainJobList{Items: jobs}
	list.APIVersion, list.Kind = v1.APIVersion, v1.Kind+"List"
	return list
}

// PrintJobs writes jobs as a table: name, phase, workers ready, GPUs, restarts, age, the
// node of worker 0 (N/A when nodes do not have it) and reason; with allNamespaces their
// namespace first, and -o wide the attempt and iteration.
func PrintJobs(v View, jobs []v1.TrainJob, nodes WorkerNodes, allNamespaces bool, where string) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintf(v.Out, "No TrainJobs %s.\n", where)
		return err
	}
	tw := v.table()
	header := "NAME\tPHASE\tREADY\tGPUS\tRESTARTS\tAGE\tNODE"
	if allNamespaces {
		header = "NAMESPACE\t" + header
	}
	if v.Wide {
		header += "\tATTEMPT\tITERATION\tREASON"
	} else {
		header += "\tREASON"
	}
	fmt.Fprintln(tw, header)
	for i := range jobs {
		fmt.Fprintln(tw, jobRow(v, &jobs[i], nodes.of(&jobs[i]), allNamespaces))
	}
	return tw.Flush()
}

// jobRow is one job's row of the list.
func jobRow(v View, j *v1.TrainJob, node string, allNamespaces bool) string {
	workers := j.GangSize()
	p := phase(j)
	if j.Spec.Suspend && j.Status.Phase != v1.PhaseSuspended && !j.Status.Phase.Finished() {
		p += " (suspending)"
	}
	var cols []string
	if allNamespaces {
		cols = append(cols, j.Namespace)
	}
	cols = append(cols, j.Name, p, fmt.Sprintf("%d/%d", j.Status.WorkersReady, workers),
		fmt.Sprint(workers*int(j.Spec.Resources.GPU)), restarts(&j.Status), v.age(j.CreationTimestamp), node)
	reason := cell(j.Status.Reason)
	if v.Wide {
		cols = append(cols, fmt.Sprint(j.Status.Attempt), fmt.Sprint(j.Status.Iteration))
	} else {
		reason = shorten(reason, reasonWidth)
	}
	return strings.Join(append(cols, orDash(reason)), "\t")
}
