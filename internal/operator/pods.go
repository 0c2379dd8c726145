package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// The operator makes a gang's pods itself, one per worker, named for their attempt and
// index (workload.PodName), as KubeRay's operator makes a RayCluster's: no Job controller
// between the TrainJob and its pods, so they arrive at the operator's own request rate,
// and a pod that is lost is replaced alone, under the same name and host name, while the
// rest of the gang keeps its pods and waits for it (internal/gang).
//
// A pod's name is fixed, so the API server never holds two pods of one worker: a
// replacement can be created only once the pod before it is gone, and a stale cache
// that misses a pod just made gets AlreadyExists. The expectations below spare those
// requests: a pod created or deleted here is not asked again until the cache has caught
// up, or expectTTL passed (a lost watch event).

// expectTTL is how long a creation or deletion waits to show in the cache before the
// reconciler acts as if it had not been made.
const expectTTL = time.Minute

// expectations are the pods this operator created or deleted that its cache does not
// show yet, per TrainJob UID: creations by pod name, deletions by pod UID; and the lost
// pods whose loss a written status counts, until they are gone.
type expectations struct {
	mu sync.Mutex
	m  map[types.UID]map[string]time.Time
}

func (e *expectations) add(job types.UID, key string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.UID]map[string]time.Time{}
	}
	if e.m[job] == nil {
		e.m[job] = map[string]time.Time{}
	}
	e.m[job][key] = now
}

// pending reports whether key was added within expectTTL and not settled since.
func (e *expectations) pending(job types.UID, key string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.m[job][key]
	return ok && now.Sub(at) < expectTTL
}

// has reports whether key was added and not settled since, however long ago.
func (e *expectations) has(job types.UID, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.m[job][key]
	return ok
}

// settle drops the keys of job that the cache now shows as done: created pods it lists
// (by name), deleted pods it lists no more or as being deleted (by UID), counted pods it
// lists no more.
func (e *expectations) settle(job types.UID, pods []corev1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := e.m[job]
	if len(keys) == 0 {
		return
	}
	alive := map[string]bool{}
	for _, p := range pods {
		delete(keys, p.Name)
		alive[countedKey(p.UID)] = true
		if p.DeletionTimestamp == nil {
			alive[deletionKey(p.UID)] = true
		}
	}
	for k := range keys {
		if (strings.HasPrefix(k, deletionPrefix) || strings.HasPrefix(k, countedPrefix)) && !alive[k] {
			delete(keys, k)
		}
	}
	if len(keys) == 0 {
		delete(e.m, job)
	}
}

func (e *expectations) forget(job types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, job)
}

const (
	deletionPrefix = "deleted:"
	countedPrefix  = "counted:"
)

func deletionKey(uid types.UID) string { return deletionPrefix + string(uid) }
func countedKey(uid types.UID) string  { return countedPrefix + string(uid) }

// createPods creates the attempt's pods that do not exist: every worker's at first, a
// lost worker's replacement later, once the pod policy passed them all (checkPods). It
// returns how many it created: none when the policy refused them (the job failed).
func (s *step) createPods(ctx context.Context, a *workload.Attempt, missing []int) (int, error) {
	var pods []*corev1.Pod
	var specs []*corev1.PodSpec
	for _, i := range missing {
		p := a.Pod(i)
		if !s.r.expect.pending(s.job.UID, p.Name, s.now) {
			pods, specs = append(pods, p), append(specs, &p.Spec)
		}
	}
	if len(pods) == 0 {
		return 0, nil
	}
	if ok, err := s.checkPods(ctx, specs...); !ok || err != nil {
		return 0, err
	}
	for made, p := range pods {
		err := s.r.Client.Create(ctx, p)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return made, fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		s.r.expect.add(s.job.UID, p.Name, s.now)
	}
	return len(pods), nil
}

// replace deletes the pods of workers that are lost, so that their replacements (same
// name, same index) can be made once they are gone, and says so. Status first: a reconcile
// counts the loss (status.workerReplacements, and for worker 0 a disruption: its loss
// takes the gang's coordinator, while the others' are counted by that coordinator as the
// gang waits for them, internal/gang) and a later one, once the count is written, deletes
// the pod. A pod on a lost node is deleted with no grace period: its kubelet will never
// confirm the end.
func (s *step) replace(ctx context.Context, lost []*failure) error {
	for _, f := range lost {
		p := s.kids.pod(s.podsAttempt(), f.worker)
		if p == nil {
			continue
		}
		if !s.r.expect.has(s.job.UID, countedKey(p.UID)) {
			if err := s.countLoss(f, p); err != nil || s.job.Status.Phase.Finished() {
				return err
			}
			continue
		}
		if f.deleting || s.r.expect.pending(s.job.UID, deletionKey(p.UID), s.now) {
			continue // being deleted already (by us, or by whoever made it lost)
		}
		opts := []client.DeleteOption{client.Preconditions{UID: &p.UID}}
		if f.nodeDown {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		if err := s.r.Client.Delete(ctx, p, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete lost pod %s: %w", p.Name, err)
		}
		s.r.expect.add(s.job.UID, deletionKey(p.UID), s.now)
	}
	return nil
}

// countLoss records in the status that worker f.worker's pod p is lost and will be
// replaced; p is marked counted once the status is written.
func (s *step) countLoss(f *failure, p *corev1.Pod) error {
	st := &s.job.Status
	if f.worker == 0 {
		if st.Disruptions >= s.job.Spec.DisruptionLimit() {
			return s.fail("TooManyDisruptions", fmt.Sprintf("attempt %d: %s; not replacing it: %d disruptions already (maxDisruptions %d)",
				st.Attempt, f.reason, st.Disruptions, s.job.Spec.DisruptionLimit()))
		}
		st.Disruptions++
		st.Restarts++
	}
	if f.nodeDown && p.Spec.NodeName != "" {
		s.r.noteLostNode(s.job.UID, f.worker, p.Spec.NodeName)
		if !slices.Contains(st.LostNodes, p.Spec.NodeName) {
			st.LostNodes = append(st.LostNodes, p.Spec.NodeName)
		}
	}
	if f.worker >= 0 && f.worker < s.podSetSize() {
		for len(st.WorkerReplacements) <= f.worker {
			st.WorkerReplacements = append(st.WorkerReplacements, 0)
		}
		st.WorkerReplacements[f.worker]++
	}
	uid := p.UID
	s.afterWrite(func() { s.r.expect.add(s.job.UID, countedKey(uid), s.now) })
	s.requeue(staleRetry)
	msg := fmt.Sprintf("attempt %d: %s; replacing it (worker %d keeps its index and host name %s; the others wait for it)",
		st.Attempt, f.reason, f.worker, p.Name)
	st.Reason = msg
	s.condition(v1.CondRunning, false, ReasonReplacingWorker, msg)
	s.event(corev1.EventTypeWarning, ReasonReplacingWorker, msg)
	return nil
}

// ReasonReplacingWorker is the Running condition's reason and the Event's while a lost
// worker's pod is replaced.
const ReasonReplacingWorker = "ReplacingWorker"

// nodeDown reports whether a node is lost: gone from the cache, or its Ready condition
// not true (the node controller's grace period has passed). "" (not scheduled) is not.
func (r *Reconciler) nodeDown(ctx context.Context) func(string) bool {
	seen := map[string]bool{}
	return func(name string) bool {
		if name == "" {
			return false
		}
		if down, ok := seen[name]; ok {
			return down
		}
		var n corev1.Node
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &n)
		down := apierrors.IsNotFound(err)
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					down = c.Status != corev1.ConditionTrue
				}
			}
		}
		seen[name] = down
		return down
	}
}

// replaceLost replaces the workers whose pods are lost and makes the pods that are
// missing, while the rest of the gang keeps its pods and waits (its launchers stop their
// ranks and wait for the worker to connect again).
func (s *step) replaceLost(ctx context.Context, o observation) error {
	st := &s.job.Status
	if err := s.replace(ctx, o.lost); err != nil || st.Phase.Finished() {
		return err
	}
	st.WorkersReady = int32(o.running)
	s.requeue(teardownPoll)
	if len(o.missing) == 0 {
		return nil
	}
	a, err := s.render(ctx, s.podsAttempt())
	var bad *templateError
	if errors.As(err, &bad) {
		return s.fail(v1.ReasonInvalidPodTemplate, bad.Error())
	}
	if err != nil {
		return err
	}
	made, err := s.createPods(ctx, a, o.missing)
	if err != nil || made == 0 {
		return err
	}
	// A replacement gets the pre-running deadline a new attempt would.
	st.AttemptStartTime = s.time()
	if s.readmitPods(o.missing, o.running, o.workers) {
		return nil
	}
	msg := fmt.Sprintf("attempt %d: created the pod(s) of worker(s) %v; %d of %d workers running", st.Attempt, o.missing, o.running, o.workers)
	st.Reason = msg
	if s.condition(v1.CondRunning, false, ReasonReplacingWorker, msg) || st.Phase == v1.PhaseRunning {
		s.event(corev1.EventTypeNormal, "WorkerReplaced", msg)
	}
	return nil
}
