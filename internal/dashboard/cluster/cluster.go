// Package cluster is the dashboard's view of a Kubernetes cluster: a dashboard.Backend
// over the TrainJobs of one namespace, through the kubeconfig (internal/kubecli). A
// TrainJob is a job whose ID is its name; its attempt's worker pods are its ranks (one a
// worker); its events and conditions are the job page's happenings; stopping it suspends
// it (as `trainyard stop --kube`). Its curves come from the run folder when this machine
// mounts the storage volume at the same path; otherwise from the last metrics the
// operator records, one point per iteration the dashboard sees.
package cluster

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/dashboard"
	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/server"
	"github.com/trainyard/trainyard/internal/shell"
	"github.com/trainyard/trainyard/internal/workload"
)

// maxSeen bounds the points remembered per job, and the jobs remembered.
const (
	maxSeen     = 10000
	maxSeenJobs = 200
)

// Source reads the TrainJobs of a cluster's namespace.
type Source struct {
	Cluster *kubecli.Cluster

	mu   sync.Mutex
	seen map[string][]client.Result // last metrics seen, by job, oldest first
}

// status maps a TrainJob's phase to a job's status.
func status(p v1.JobPhase) client.JobStatus {
	switch p {
	case v1.PhaseRunning, v1.PhaseRestarting:
		return "RUNNING"
	case v1.PhaseSucceeded:
		return "SUCCEEDED"
	case v1.PhaseFailed:
		return "FAILED"
	case v1.PhaseInterrupted:
		return "STOPPED"
	}
	return "PENDING"
}

// jobOf converts a TrainJob.
func jobOf(t *v1.TrainJob) client.Job {
	j := client.Job{ID: t.Name, Name: t.Name, Status: status(t.Status.Phase), Message: t.Status.Reason,
		Workers: t.Spec.WorkerCount(), Resources: &t.Spec.Resources, RunDir: t.Status.RunDir,
		SubmittedAt: t.CreationTimestamp.Time, SubmittedBy: t.Annotations[v1.AnnotationSubmittedBy]}
	if t.Spec.Suspend && !t.Status.Phase.Finished() {
		j.StopRequested = true
	}
	// Disruptions (an eviction, a Kueue preemption) are restarts that used none of
	// maxRestarts: the dashboard shows them as preemptions.
	j.Restarts, j.Preemptions = int(t.Status.Restarts-t.Status.Disruptions), int(t.Status.Disruptions)
	if st := t.Status.StartTime; st != nil {
		at := st.Time
		j.StartedAt = &at
	}
	if ct := t.Status.CompletionTime; ct != nil {
		at := ct.Time
		j.EndedAt = &at
	}
	j.Entrypoint = shell.Join(append(slices.Clone(t.Spec.Command), t.Spec.Args...))
	return j
}

// List returns the namespace's TrainJobs in the given statuses, oldest first.
func (s *Source) List(ctx context.Context, statuses ...client.JobStatus) ([]client.Job, error) {
	page, err := s.ListPage(ctx, client.ListOptions{Statuses: statuses})
	return page.Jobs, err
}

// ListPage returns a page of the namespace's TrainJobs.
func (s *Source) ListPage(ctx context.Context, opts client.ListOptions) (client.JobList, error) {
	list, err := s.Cluster.ListJobs(ctx, false)
	if err != nil {
		return client.JobList{}, err
	}
	jobs := make([]client.Job, 0, len(list))
	for i := range list {
		jobs = append(jobs, jobOf(&list[i]))
	}
	return dashboard.PageOf(jobs, opts), nil
}

// notFound makes an error client.IsNotFound recognises.
func notFound(err error) error { return &client.APIError{Status: 404, Message: err.Error()} }

// Get returns a TrainJob with its attempt's worker pods as ranks and its last result.
func (s *Source) Get(ctx context.Context, ref string) (client.JobDetail, error) {
	d, err := s.Cluster.Describe(ctx, ref)
	if err != nil {
		return client.JobDetail{}, notFound(err)
	}
	t := d.Job
	out := client.JobDetail{Job: jobOf(t), Spec: t}
	if t.Status.Attempt > 0 {
		a := client.Attempt{Number: int(t.Status.Attempt)}
		if st := t.Status.AttemptStartTime; st != nil {
			a.Started = st.Time
		}
		procs := 1
		if t.Spec.ProcsPerWorker != nil {
			procs = int(*t.Spec.ProcsPerWorker)
		}
		for i := range d.Pods {
			a.Ranks = append(a.Ranks, rankOf(&d.Pods[i], procs))
		}
		out.Run = &client.Run{Phase: t.Status.Phase, Reason: t.Status.Reason, Attempts: []client.Attempt{a}}
	}
	if last := s.lastResult(t); last != nil {
		out.Results = last
	}
	if t.Status.LatestCheckpoint != "" {
		out.Checkpoints = []string{t.Status.LatestCheckpoint}
	}
	return out, nil
}

// rankOf describes a worker pod as the first rank of its worker, with what it is doing.
func rankOf(p *corev1.Pod, procs int) client.Rank {
	worker, state, msg := kubecli.WorkerSummary(p)
	r := client.Rank{Rank: max(worker, 0) * procs, Worker: worker, Started: p.CreationTimestamp.Time,
		Error: fmt.Sprintf("pod %s on %s: %s", p.Name, orDash(p.Spec.NodeName), state)}
	if msg != "" {
		r.Error += ": " + msg
	}
	for _, c := range p.Spec.Containers {
		if g, ok := c.Resources.Limits[kubecli.GPUResource]; ok && c.Name == workload.WorkerContainer {
			r.GPUs = g.String() + " GPU"
		}
	}
	return r
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lastResult is the job's last metrics as the operator records them, remembered as a
// point of its curve when it is new.
func (s *Source) lastResult(t *v1.TrainJob) *client.Result {
	if t.Status.Iteration == 0 {
		return nil
	}
	r := client.Result{Iteration: int(t.Status.Iteration), Metrics: client.Metrics{}, Timestamp: time.Now()}
	for k, v := range t.Status.LastMetrics {
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) {
			r.Metrics[k] = f
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string][]client.Result{}
	}
	points := s.seen[t.Name]
	if len(points) == 0 || points[len(points)-1].Iteration < r.Iteration {
		if len(s.seen) >= maxSeenJobs && points == nil {
			for k := range s.seen { // forget one job to make room
				delete(s.seen, k)
				break
			}
		}
		if len(points) >= maxSeen {
			points = points[1:]
		}
		s.seen[t.Name] = append(points, r)
	}
	return &r
}

// Results returns the job's results: from its run folder when this machine has it,
// otherwise the last metrics the dashboard has seen.
func (s *Source) Results(ctx context.Context, ref string, opts client.ResultOptions) (client.ResultList, error) {
	t, err := s.Cluster.GetJob(ctx, ref)
	if err != nil {
		return client.ResultList{}, notFound(err)
	}
	if dir := t.Status.RunDir; dir != "" {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return server.ReadResultList(rundir.ResultsDir(dir), opts.After, max(opts.Max, server.DefaultResultPoints))
		}
	}
	s.lastResult(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := client.ResultList{Results: []client.Result{}}
	for _, r := range s.seen[t.Name] {
		if r.Iteration > opts.After {
			out.Results = append(out.Results, r)
		}
	}
	out.Total = len(out.Results)
	return out, nil
}

// Stop suspends the TrainJob: the operator stops its running attempt.
func (s *Source) Stop(ctx context.Context, ref string) (client.Job, error) {
	t, _, err := s.Cluster.Suspend(ctx, ref)
	if err != nil {
		return client.Job{}, err
	}
	return jobOf(t), nil
}

// Delete deletes the TrainJob (as trainyard delete --kube), without waiting for its pods
// to go.
func (s *Source) Delete(ctx context.Context, ref string) error {
	return s.Cluster.Delete(ctx, ref, false, 0)
}

// Logs returns the job's log: its worker pods' lines (or the run folder's), the last
// opts.Tail lines of each rank.
func (s *Source) Logs(ctx context.Context, id string, opts client.LogOptions) (string, error) {
	var out strings.Builder
	if err := s.Cluster.Logs(ctx, id, logOptions(opts, false), &out, io.Discard); err != nil {
		return "", err
	}
	return logstream.LastLines(out.String(), opts.Tail), nil
}

// Follow writes the job's log as its workers write it, until it ends.
func (s *Source) Follow(ctx context.Context, ref string, w io.Writer, opts client.LogOptions) error {
	return s.Cluster.Logs(ctx, ref, logOptions(opts, true), w, io.Discard)
}

func logOptions(opts client.LogOptions, follow bool) kubecli.LogOptions {
	o := kubecli.LogOptions{Follow: follow, Tail: opts.Tail, Rank: -1}
	if opts.Rank != nil {
		o.Rank = *opts.Rank
	}
	return o
}

// Node returns the cluster's GPUs, CPU and memory: what its nodes offer and what pods
// request. GPU indices and utilization are not known here.
func (s *Source) Node(ctx context.Context) (client.Node, error) {
	nodes, err := s.Cluster.NodeUsage(ctx)
	if err != nil {
		return client.Node{}, err
	}
	var n client.Node
	for _, u := range nodes {
		n.GPUs.Total += u.GPUs.Allocatable
		n.GPUs.Allocated += u.GPUs.Requested
		n.MilliCPU.Total += u.MilliCPU.Allocatable
		n.MilliCPU.Allocated += u.MilliCPU.Requested
		n.MemoryBytes.Total += u.MemoryBytes.Allocatable
		n.MemoryBytes.Allocated += u.MemoryBytes.Requested
	}
	n.GPUs.Free = max(0, n.GPUs.Total-n.GPUs.Allocated)
	n.MilliCPU.Free = max(0, n.MilliCPU.Total-n.MilliCPU.Allocated)
	n.MemoryBytes.Free = max(0, n.MemoryBytes.Total-n.MemoryBytes.Allocated)
	return n, nil
}

// Happenings returns the job's events (oldest first) and then its conditions.
func (s *Source) Happenings(ctx context.Context, ref string) ([]dashboard.Happening, error) {
	d, err := s.Cluster.Describe(ctx, ref)
	if err != nil {
		return nil, notFound(err)
	}
	var out []dashboard.Happening
	for i := range d.Events {
		e := &d.Events[i]
		out = append(out, dashboard.Happening{Time: kubecli.EventTime(e), Kind: e.Type, Reason: e.Reason,
			Message: e.Message, Count: int(max(1, e.Count))})
	}
	for _, c := range d.Job.Status.Conditions {
		out = append(out, dashboard.Happening{Time: c.LastTransitionTime.Time, Kind: "Condition " + c.Type + "=" + string(c.Status),
			Reason: c.Reason, Message: c.Message, Count: 1})
	}
	return out, nil
}

// RankUse reads what the GPUs of each running worker pod of the job's current attempt do
// now, in the pods, through the API server; a worker's ranks share its figures, keyed by
// its first rank as Get lists them.
func (s *Source) RankUse(ctx context.Context, ref string) (map[int]*client.GPUUse, error) {
	d, err := s.Cluster.Describe(ctx, ref)
	if err != nil {
		return nil, notFound(err)
	}
	procs := 1
	if p := d.Job.Spec.ProcsPerWorker; p != nil {
		procs = int(*p)
	}
	out := map[int]*client.GPUUse{}
	for _, g := range s.Cluster.GPUsOf(ctx, d.Pods) {
		if u, ok := kubecli.UseOf(g); ok {
			out[g.Worker*procs] = u
		}
	}
	return out, nil
}
