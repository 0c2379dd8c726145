package kubecli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/shell"
	"github.com/trainyard/trainyard/internal/workload"
)

// messageWidth is the most of a pod's or a condition's message a table shows.
const messageWidth = 80

// GetJob returns the TrainJob name of the cluster's namespace.
func (c *Cluster) GetJob(ctx context.Context, name string) (*v1.TrainJob, error) {
	job, err := c.Jobs.Get(ctx, c.Namespace, name)
	if err != nil {
		return nil, c.jobError(c.Namespace, name, err)
	}
	return job, nil
}

// Detail is everything 'get --kube' shows of a job.
type Detail struct {
	Job *v1.TrainJob
	// Pods are the worker pods of the job's current attempt.
	Pods []corev1.Pod
	// Events are the job's events, oldest first; with PodEvents its pods' too.
	Events []corev1.Event
	// PodEvents says that Events hold the pods' events as well as the job's (get -e).
	PodEvents bool
	// Problems say what could not be read (pods, events) and why.
	Problems []string
}

// Describe reads a job, the pods of its current attempt and its events. Pods and events
// that cannot be read are noted in Problems; the job itself must be there.
func (c *Cluster) Describe(ctx context.Context, name string) (*Detail, error) {
	job, err := c.GetJob(ctx, name)
	if err != nil {
		return nil, err
	}
	d := &Detail{Job: job}
	if job.Status.Attempt > 0 {
		if d.Pods, err = c.workerPods(ctx, job, job.Status.Attempt); err != nil {
			d.Problems = append(d.Problems, "cannot list the worker pods: "+err.Error())
		}
	}
	if d.Events, err = c.jobEvents(ctx, job); err != nil {
		d.Problems = append(d.Problems, "cannot list the events: "+err.Error())
	}
	return d, nil
}

// jobEvents returns the events about job, oldest first. core/v1 and events.k8s.io/v1
// serve the same stored events, so listing one API finds those recorded through either.
func (c *Cluster) jobEvents(ctx context.Context, job *v1.TrainJob) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.kind": v1.Kind, "involvedObject.name": job.Name}.AsSelector().String()
	list, err := c.Core.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, c.explain(err)
	}
	events := slices.DeleteFunc(list.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.UID != "" && job.UID != "" && e.InvolvedObject.UID != job.UID // an earlier job of that name
	})
	sortEvents(events)
	return events, nil
}

// AddPodEvents adds the events of d's pods (scheduling, image pulls, evictions: what
// Arena's get -e shows) to the job's, in time order. Events that cannot be read are noted
// in Problems.
func (c *Cluster) AddPodEvents(ctx context.Context, d *Detail) {
	d.PodEvents = true
	if len(d.Pods) == 0 {
		return
	}
	uids := map[types.UID]bool{}
	for i := range d.Pods {
		uids[d.Pods[i].UID] = true
	}
	sel := fields.Set{"involvedObject.kind": "Pod"}.AsSelector().String()
	list, err := c.Core.CoreV1().Events(d.Job.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		d.Problems = append(d.Problems, "cannot list the pods' events: "+c.explain(err).Error())
		return
	}
	for _, e := range list.Items {
		if uids[e.InvolvedObject.UID] {
			d.Events = append(d.Events, e)
		}
	}
	sortEvents(d.Events)
}

// sortEvents orders events by when they were last seen, oldest first.
func sortEvents(events []corev1.Event) {
	slices.SortStableFunc(events, func(a, b corev1.Event) int {
		return eventTime(&a).Compare(eventTime(&b).Time)
	})
}

// eventTime is when an event was last seen, whichever API recorded it.
func eventTime(e *corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp
	}
	return e.CreationTimestamp
}

// eventFirstTime is when an event was first seen.
func eventFirstTime(e *corev1.Event) metav1.Time {
	switch {
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	}
	return eventTime(e)
}

// eventCount is how many times an event happened.
func eventCount(e *corev1.Event) int32 {
	if e.Series != nil && e.Series.Count > e.Count {
		return e.Series.Count
	}
	return max(1, e.Count)
}

// PrintDetail writes a job as kubectl describe does: fields, then sections.
func PrintDetail(v View, d *Detail) error {
	tw := v.table()
	for _, f := range detailFields(v, d) {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, section := range []func(View, *Detail) error{printMetrics, printConditions, printWorkers, printGPUs, printEvents} {
		if err := section(v, d); err != nil {
			return err
		}
	}
	for _, p := range d.Problems {
		if _, err := fmt.Fprintf(v.Out, "\nWarning: %s\n", p); err != nil {
			return err
		}
	}
	return nil
}

// detailFields are the job's name-value lines; those that do not apply are left out.
func detailFields(v View, d *Detail) [][2]string {
	j := d.Job
	s, st := &j.Spec, &j.Status
	p := phase(j)
	if st.Phase == "" {
		p += " (the operator has not seen the job yet; is it installed and running?)"
	}
	f := [][2]string{{"Name", j.Name}, {"Namespace", j.Namespace}, {"Phase", p}}
	if st.Reason != "" {
		f = append(f, [2]string{"Reason", cell(st.Reason)})
	}
	if s.Suspend {
		f = append(f, [2]string{"Suspended", "yes: no attempt runs until spec.suspend is false again"})
	}
	if st.Attempt > 0 {
		f = append(f, [2]string{"Attempt", fmt.Sprint(st.Attempt)})
	}
	f = append(f, [2]string{"Restarts", restarts(st)},
		[2]string{"Workers", gangShape(s) + partly(d.Job)},
		[2]string{"Ready", fmt.Sprintf("%d/%d", st.WorkersReady, d.Job.GangSize())})
	if k := s.Kubernetes; k != nil {
		f = append(f, [2]string{"Image", orDash(k.Image)})
		if k.QueueName != "" {
			f = append(f, [2]string{"Queue", k.QueueName})
		}
	}
	f = append(f, [2]string{"Priority", priorityClass(d)})
	if src, ok := jobspec.GitSource(s); ok {
		f = append(f, [2]string{"Code", src.Describe(st.SourceCommit)})
	}
	f = append(f, [2]string{"Command", shell.Join(append(slices.Clone(s.Command), s.Args...))},
		[2]string{"Created", v.clock(&j.CreationTimestamp)})
	if st.StartTime != nil {
		f = append(f, [2]string{"Started", v.clock(st.StartTime)})
	}
	if st.CompletionTime != nil {
		f = append(f, [2]string{"Completed", v.clock(st.CompletionTime)})
	}
	f = append(f, [2]string{"Duration", trainingDuration(v, j)}, [2]string{"Run dir", orDash(st.RunDir)})
	if k := s.Kubernetes; k != nil && k.TensorBoard != nil {
		f = append(f, [2]string{"TensorBoard", workload.TensorBoardAccess(j.Namespace, j.Name)})
	}
	if st.Iteration > 0 {
		f = append(f, [2]string{"Iteration", fmt.Sprint(st.Iteration)})
	}
	return append(f, [2]string{"Checkpoint", orDash(st.LatestCheckpoint)})
}

// priorityClass is the priority class of the job's pods (which admission may have set
// from the cluster's default), else the one the job asks for, else N/A, as Arena shows it.
func priorityClass(d *Detail) string {
	for i := range d.Pods {
		if pc := d.Pods[i].Spec.PriorityClassName; pc != "" {
			return pc
		}
	}
	if k := d.Job.Spec.Kubernetes; k != nil && k.PriorityClassName != "" {
		return k.PriorityClassName
	}
	return notAvailable
}

// trainingDuration is how long the job has trained: from its first attempt's start to its
// completion, or until now; N/A before it started.
func trainingDuration(v View, j *v1.TrainJob) string {
	st := &j.Status
	if st.StartTime == nil {
		return notAvailable + " (not started)"
	}
	end := v.Now
	switch {
	case st.CompletionTime != nil:
		end = st.CompletionTime.Time
	case st.Phase.Finished(): // ended with no completion time: when it last changed
		end = st.StartTime.Time
		for _, c := range st.Conditions {
			if c.LastTransitionTime.After(end) {
				end = c.LastTransitionTime.Time
			}
		}
	}
	return duration.HumanDuration(end.Sub(st.StartTime.Time))
}

// printMetrics writes the last reported metrics, by name.
func printMetrics(v View, d *Detail) error {
	m := d.Job.Status.LastMetrics
	if len(m) == 0 {
		return nil
	}
	fmt.Fprintf(v.Out, "\nLast metrics (iteration %d):\n", d.Job.Status.Iteration)
	tw := v.table()
	fmt.Fprintln(tw, "  METRIC\tVALUE")
	for _, name := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(tw, "  %s\t%s\n", cell(name), cell(m[name]))
	}
	return tw.Flush()
}

// printConditions writes the job's conditions.
func printConditions(v View, d *Detail) error {
	conds := d.Job.Status.Conditions
	if len(conds) == 0 {
		return nil
	}
	fmt.Fprintln(v.Out, "\nConditions:")
	tw := v.table()
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason), v.age(c.LastTransitionTime),
			orDash(shorten(cell(c.Message), messageWidth)))
	}
	return tw.Flush()
}

// printWorkers writes the state of each worker pod of the current attempt: Arena's
// instances, with the ranks each runs.
func printWorkers(v View, d *Detail) error {
	attempt := d.Job.Status.Attempt
	if attempt == 0 {
		return nil
	}
	pods := workload.AttemptName(d.Job.Name, int(attempt))
	if n := d.Job.Status.PodsAttempt; n > 0 && n != attempt {
		pods = fmt.Sprintf("restarted in place on the pods of attempt %d, %s", n, workload.AttemptName(d.Job.Name, int(n)))
	}
	if len(d.Pods) == 0 {
		_, err := fmt.Fprintf(v.Out, "\nWorkers of attempt %d (%s): no pods\n", attempt, pods)
		return err
	}
	fmt.Fprintf(v.Out, "\nWorkers of attempt %d (%s):\n", attempt, pods)
	tw := v.table()
	fmt.Fprintln(tw, "  WORKER\tRANKS\tPOD\tPHASE\tSTATE\tRESTARTS\tREPLACED\tGPUS\tNODE\tIP\tAGE\tMESSAGE")
	for i := range d.Pods {
		p := &d.Pods[i]
		w := workerIndex(p)
		worker := "?"
		if w >= 0 {
			worker = fmt.Sprint(w)
		}
		state, msg := podState(p)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", worker, rankRange(&d.Job.Spec, w), p.Name,
			orDash(string(p.Status.Phase)), cell(state), podRestarts(p), replaced(&d.Job.Status, w), gpus(podRequests(p)), orDash(p.Spec.NodeName),
			orDash(p.Status.PodIP), v.age(p.CreationTimestamp), orDash(shorten(cell(msg), messageWidth)))
	}
	return tw.Flush()
}

// replaced is how many times the operator replaced worker w's pod.
func replaced(st *v1.TrainJobStatus, w int) int32 {
	if w < 0 || w >= len(st.WorkerReplacements) {
		return 0
	}
	return st.WorkerReplacements[w]
}

// printGPUs writes Arena's line of the GPUs the job's pods hold (those on a node that have
// not ended) of those it asks for, while it has not ended and asks for some.
func printGPUs(v View, d *Detail) error {
	j := d.Job
	requested := int64(j.GangSize()) * int64(j.Spec.Resources.GPU)
	if requested == 0 || j.Status.Phase.Finished() {
		return nil
	}
	var allocated int64
	for i := range d.Pods {
		if p := &d.Pods[i]; p.Spec.NodeName != "" && !terminated(p) {
			allocated += gpus(podRequests(p))
		}
	}
	_, err := fmt.Fprintf(v.Out, "\nGPUs:\n  Allocated/Requested GPUs of Job: %d/%d\n", allocated, requested)
	return err
}

// printEvents writes the job's events as kubectl describe does; with its pods' events,
// each with the object it is about, as kubectl get events does.
func printEvents(v View, d *Detail) error {
	if len(d.Events) == 0 {
		_, err := fmt.Fprintln(v.Out, "\nEvents: <none>")
		return err
	}
	fmt.Fprintln(v.Out, "\nEvents:")
	tw := v.table()
	header := "  TYPE\tREASON\tAGE\tFROM\tMESSAGE"
	if d.PodEvents {
		header = "  OBJECT\t" + header[2:]
	}
	fmt.Fprintln(tw, header)
	for i := range d.Events {
		e := &d.Events[i]
		age := v.age(eventTime(e))
		if n := eventCount(e); n > 1 {
			age += fmt.Sprintf(" (x%d over %s)", n, v.age(eventFirstTime(e)))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", orDash(e.Type), orDash(e.Reason), age, orDash(from), cell(strings.TrimSpace(e.Message)))
		if d.PodEvents {
			row = strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name + "\t" + row
		}
		fmt.Fprintln(tw, "  "+row)
	}
	return tw.Flush()
}

// EventTime is when an event was last seen, whichever API recorded it.
func EventTime(e *corev1.Event) time.Time { return eventTime(e).Time }
