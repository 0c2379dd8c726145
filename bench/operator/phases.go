package main

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/workload"
)

// phase1Result is phase 1: TrainJobs created until every attempt-1 Service and pod exists.
type phase1Result struct {
	stretch
	creates    time.Duration // the TrainJob creates alone
	pods       time.Duration // first create → the last attempt-1 pod seen
	services   time.Duration // first create → the last attempt-1 Service seen
	statusDone time.Duration // first create → every TrainJob's status says attempt 1 was created
}

// allExist is the time until every Service and pod exists.
func (p phase1Result) allExist() time.Duration { return max(p.pods, p.services) }

// podsResult is the setup between the phases: every pod set Running.
type podsResult struct {
	stretch
	pods    time.Duration // the pods' statuses written
	running time.Duration // start → every TrainJob's status says Running
}

// phase2Result is phase 2: one worker of each job Failed until attempt 2 exists.
type phase2Result struct {
	stretch
	fails    time.Duration // the pod status updates alone
	pods     time.Duration // first failure → the last attempt-2 pod seen
	services time.Duration // first failure → the last attempt-2 Service seen
	gone     time.Duration // first failure → attempt 1's last Service or pod gone
}

// allExist is the time until every attempt-2 Service and pod exists.
func (p phase2Result) allExist() time.Duration { return max(p.pods, p.services) }

// operatorRun holds what the operator phases share.
type operatorRun struct {
	cfg   *config
	cp    *controlPlane
	m     *meter
	t     *tracker
	start time.Time // when the current phase began
}

// phase1 creates the TrainJobs and waits until the operator made every attempt-1
// Service and pod, and wrote every TrainJob's status.
func (r *operatorRun) phase1(ctx context.Context) (res phase1Result, err error) {
	n := r.cfg.jobs
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
		progress("phase 1: creates done in %s; waiting for every attempt-1 Service and pod", res.creates.Round(time.Millisecond))
		if res.pods, res.services, err = r.waitPresent(ctx, "phase 1: attempt-1 Services and pods", 1); err != nil {
			return err
		}
		res.statusDone, err = r.waitStatus(ctx, "phase 1: TrainJob statuses say attempt 1 was created", func(st *v1.TrainJobStatus) bool {
			return st.Attempt == 1 && apimeta.IsStatusConditionTrue(st.Conditions, v1.CondCreated)
		})
		return err
	})
	return res, err
}

// startAllPods sets every attempt-1 pod Running, as a kubelet would, then waits until
// every TrainJob's status says Running.
func (r *operatorRun) startAllPods(ctx context.Context) (res podsResult, err error) {
	progress("pods: %d pods set Running from %d goroutines (not part of either phase)", r.cfg.jobs*r.cfg.workers, r.cfg.clients)
	res.stretch, err = r.m.measure(ctx, "pods", func() error {
		r.start = time.Now()
		pods, err := listAttemptPods(ctx, r.cp.client, operatorNamespace, 1)
		if err != nil {
			return err
		}
		names := podNames(r.cfg.jobs, r.cfg.workers, 1)
		patch := runningPatch()
		if res.pods, err = hammer(len(names), r.cfg.clients, func(i int) error {
			name, ok := pods[names[i]]
			if !ok {
				return fmt.Errorf("no pod for worker %s", names[i])
			}
			return patchPodStatus(ctx, r.cp.client, operatorNamespace, name, patch)
		}); err != nil {
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

// phase2 fails one worker of each job and waits until every attempt-2 Service and pod
// exists and attempt 1 is gone.
func (r *operatorRun) phase2(ctx context.Context) (res phase2Result, err error) {
	n, w := r.cfg.jobs, failedWorker(r.cfg.workers)
	progress("phase 2: worker %d of each of the %d jobs set Failed (exit code 1) from %d goroutines", w, n, r.cfg.clients)
	pods, err := listAttemptPods(ctx, r.cp.client, operatorNamespace, 1)
	if err != nil {
		return res, err
	}
	patch := failedPatch()
	res.stretch, err = r.m.measure(ctx, "phase 2", func() error {
		r.start = time.Now()
		var err error
		res.fails, err = hammer(n, r.cfg.clients, func(i int) error {
			return patchPodStatus(ctx, r.cp.client, operatorNamespace, pods[workload.PodName(jobName(i), 1, w)], patch)
		})
		if err != nil {
			return err
		}
		progress("phase 2: failures set in %s; waiting for every attempt-2 Service and pod", res.fails.Round(time.Millisecond))
		if res.pods, res.services, err = r.waitPresent(ctx, "phase 2: attempt-2 Services and pods", 2); err != nil {
			return err
		}
		res.gone, err = r.waitGone(ctx, "phase 2: attempt 1 gone")
		return err
	})
	return res, err
}

// waitPresent waits until every Service and worker pod of attempt n exists, and returns
// the time from the phase's start until the last pod and the last Service were seen.
func (r *operatorRun) waitPresent(ctx context.Context, what string, n int) (pods, services time.Duration, err error) {
	names, podList := attemptNames(r.cfg.jobs, n), podNames(r.cfg.jobs, r.cfg.workers, n)
	err = waitFor(ctx, r.cfg.poll, what, func() (bool, string, error) {
		np, lastPod := r.t.present(kindPod, podList)
		ns, lastSvc := r.t.present(kindService, names)
		pods, services = lastPod.Sub(r.start), lastSvc.Sub(r.start)
		return np == len(podList) && ns == len(names), fmt.Sprintf("%d of %d pods, %d of %d Services", np, len(podList), ns, len(names)), nil
	})
	return pods, services, err
}

// waitGone waits until attempt 1's Services and pods are all gone, and returns the time
// from the phase's start until the last went.
func (r *operatorRun) waitGone(ctx context.Context, what string) (took time.Duration, err error) {
	names, pods := attemptNames(r.cfg.jobs, 1), podNames(r.cfg.jobs, r.cfg.workers, 1)
	err = waitFor(ctx, r.cfg.poll, what, func() (bool, string, error) {
		ns, lastSvc := r.t.gone(kindService, names)
		np, lastPod := r.t.gone(kindPod, pods)
		took = later(lastSvc, lastPod).Sub(r.start)
		return ns == len(names) && np == len(pods),
			fmt.Sprintf("%d of %d Services, %d of %d pods gone", ns, len(names), np, len(pods)), nil
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
