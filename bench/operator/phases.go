package main

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/workload"
)

// phase1Result is phase 1: TrainJobs created until every attempt-1 Job and Service exists.
type phase1Result struct {
	stretch
	creates    time.Duration // the TrainJob creates alone
	jobs       time.Duration // first create → the last attempt-1 Job seen
	services   time.Duration // first create → the last attempt-1 Service seen
	statusDone time.Duration // first create → every TrainJob's status says attempt 1 was created
}

// allExist is the time until every Job and Service exists.
func (p phase1Result) allExist() time.Duration { return max(p.jobs, p.services) }

// podsResult is the setup between the phases: every pod made and set Running.
type podsResult struct {
	stretch
	pods    time.Duration // the pods created and set Running
	running time.Duration // start → every TrainJob's status says Running
}

// phase2Result is phase 2: one worker of each job Failed until attempt 2 exists.
type phase2Result struct {
	stretch
	fails    time.Duration // the pod status updates alone
	jobs     time.Duration // first failure → the last attempt-2 Job seen
	services time.Duration // first failure → the last attempt-2 Service seen
	gone     time.Duration // first failure → attempt 1's last Job, Service or pod gone
}

// allExist is the time until every attempt-2 Job and Service exists.
func (p phase2Result) allExist() time.Duration { return max(p.jobs, p.services) }

// operatorRun holds what the operator phases share.
type operatorRun struct {
	cfg   *config
	cp    *controlPlane
	m     *meter
	t     *tracker
	pods  [][]*corev1.Pod // each job's attempt-1 pods, as last written
	start time.Time       // when the current phase began
}

// phase1 creates the TrainJobs and waits until the operator made every attempt-1 Job and
// Service, and wrote every TrainJob's status.
func (r *operatorRun) phase1(ctx context.Context) (res phase1Result, err error) {
	n := r.cfg.jobs
	names := attemptNames(n, 1)
	progress("phase 1: %d TrainJobs of %d workers created from %d goroutines", n, r.cfg.workers, r.cfg.clients)
	res.stretch, err = r.m.measure(ctx, "phase 1", func() error {
		r.start = time.Now()
		var err error
		res.creates, err = hammer(n, r.cfg.clients, func(i int) error {
			return r.cp.client.Create(ctx, trainJob(operatorNamespace, i, r.cfg.workers))
		})
		if err != nil {
			return err
		}
		progress("phase 1: creates done in %s; waiting for every attempt-1 Job and Service", res.creates.Round(time.Millisecond))
		if res.jobs, res.services, err = r.waitPresent(ctx, "phase 1: attempt-1 Jobs and Services", names); err != nil {
			return err
		}
		res.statusDone, err = r.waitStatus(ctx, "phase 1: TrainJob statuses say attempt 1 was created", func(st *v1.TrainJobStatus) bool {
			return st.Attempt == 1 && apimeta.IsStatusConditionTrue(st.Conditions, v1.CondCreated)
		})
		return err
	})
	return res, err
}

// startAllPods makes every attempt-1 pod and sets it Running, then waits until every
// TrainJob's status says Running.
func (r *operatorRun) startAllPods(ctx context.Context) (res podsResult, err error) {
	n := r.cfg.jobs
	r.pods = make([][]*corev1.Pod, n)
	progress("pods: %d pods created and set Running from %d goroutines (not part of either phase)", n*r.cfg.workers, r.cfg.clients)
	res.stretch, err = r.m.measure(ctx, "pods", func() error {
		r.start = time.Now()
		var err error
		res.pods, err = hammer(n, r.cfg.clients, func(i int) error {
			var job batchv1.Job
			key := client.ObjectKey{Namespace: operatorNamespace, Name: workload.AttemptName(jobName(i), 1)}
			if err := r.cp.client.Get(ctx, key, &job); err != nil {
				return err
			}
			r.pods[i], err = startPods(ctx, r.cp.client, &job)
			return err
		})
		if err != nil {
			return err
		}
		progress("pods: done in %s; waiting for every TrainJob to say Running", res.pods.Round(time.Millisecond))
		res.running, err = r.waitStatus(ctx, "pods: TrainJobs Running", func(st *v1.TrainJobStatus) bool {
			return st.Phase == v1.PhaseRunning && st.WorkersReady == int32(r.cfg.workers)
		})
		return err
	})
	return res, err
}

// phase2 fails one worker of each job and waits until every attempt-2 Job and Service
// exists and attempt 1 is gone.
func (r *operatorRun) phase2(ctx context.Context) (res phase2Result, err error) {
	n, w := r.cfg.jobs, failedWorker(r.cfg.workers)
	progress("phase 2: worker %d of each of the %d jobs set Failed (exit code 1) from %d goroutines", w, n, r.cfg.clients)
	res.stretch, err = r.m.measure(ctx, "phase 2", func() error {
		r.start = time.Now()
		var err error
		res.fails, err = hammer(n, r.cfg.clients, func(i int) error { return failPod(ctx, r.cp.client, r.pods[i][w]) })
		if err != nil {
			return err
		}
		progress("phase 2: failures set in %s; waiting for every attempt-2 Job and Service", res.fails.Round(time.Millisecond))
		if res.jobs, res.services, err = r.waitPresent(ctx, "phase 2: attempt-2 Jobs and Services", attemptNames(n, 2)); err != nil {
			return err
		}
		res.gone, err = r.waitGone(ctx, "phase 2: attempt 1 gone")
		return err
	})
	return res, err
}

// waitPresent waits until every named Job and Service exists, and returns the time from
// the phase's start until the last Job and the last Service were seen.
func (r *operatorRun) waitPresent(ctx context.Context, what string, names []string) (jobs, services time.Duration, err error) {
	err = waitFor(ctx, r.cfg.poll, what, func() (bool, string, error) {
		nj, lastJob := r.t.present(kindJob, names)
		ns, lastSvc := r.t.present(kindService, names)
		jobs, services = lastJob.Sub(r.start), lastSvc.Sub(r.start)
		return nj == len(names) && ns == len(names), fmt.Sprintf("%d of %d Jobs, %d Services", nj, len(names), ns), nil
	})
	return jobs, services, err
}

// waitGone waits until attempt 1's Jobs, Services and pods are all gone, and returns the
// time from the phase's start until the last went.
func (r *operatorRun) waitGone(ctx context.Context, what string) (took time.Duration, err error) {
	names, pods := attemptNames(r.cfg.jobs, 1), podNames(r.cfg.jobs, r.cfg.workers, 1)
	err = waitFor(ctx, r.cfg.poll, what, func() (bool, string, error) {
		nj, lastJob := r.t.gone(kindJob, names)
		ns, lastSvc := r.t.gone(kindService, names)
		np, lastPod := r.t.gone(kindPod, pods)
		took = later(later(lastJob, lastSvc), lastPod).Sub(r.start)
		return nj == len(names) && ns == len(names) && np == len(pods),
			fmt.Sprintf("%d of %d Jobs, %d Services, %d of %d pods gone", nj, len(names), ns, np, len(pods)), nil
	})
	return took, err
}

// waitStatus waits until every TrainJob's status satisfies ok, and returns the time from
// the phase's start until the check first saw it (within -poll).
func (r *operatorRun) waitStatus(ctx context.Context, what string, ok func(*v1.TrainJobStatus) bool) (time.Duration, error) {
	err := waitFor(ctx, r.cfg.poll, what, func() (bool, string, error) {
		n, err := r.t.countTrainJobs(ctx, ok)
		return n == r.cfg.jobs, fmt.Sprintf("%d of %d TrainJobs", n, r.cfg.jobs), err
	})
	return time.Since(r.start), err
}

// memPoint is the operator's memory at one point of the run.
type memPoint struct {
	what string
	mem  host.Memory
}

// markMemory reads the operator's memory now.
func markMemory(o *operatorProc, what string) (memPoint, error) {
	m, err := o.memory()
	return memPoint{what: what, mem: m}, err
}
