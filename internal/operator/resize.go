package operator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// An elastic gang (spec.minWorkers below the gang's size) whose workers the scheduler
// cannot place goes on without them: once each has been unschedulable for the elastic
// settle time (Options.ElasticSettle), and at least spec.minWorkers remain, the gang is
// resized to the workers that can run and restarted as the next attempt, from its latest
// checkpoint, using no restart. That is the lost node's case: its worker's pod is replaced
// (pods.go), and the replacement stays Pending. The size is recorded in status.workers
// before anything is torn down; with Kueue the quota the smaller gang no longer uses is
// given back through the Workload's status.reclaimablePods (kueue.go).

// DefaultElasticSettle is how long a worker of an elastic gang stays unschedulable before
// the gang goes on without it, when Options.ElasticSettle is 0.
const DefaultElasticSettle = 30 * time.Second

// ReasonResized is the reason of the Restarting condition and of the Event of a gang
// that restarts at another size.
const ReasonResized = "Resized"

// stuckWorker is a worker whose pod the scheduler cannot place.
type stuckWorker struct {
	worker  int
	pod     string
	since   time.Time // when the scheduler first said so
	message string    // what the scheduler said
}

// unschedulable reports whether p waits for a node the scheduler cannot find, and since
// when. A pod the scheduler nominated a node for waits for the pods it preempts there to
// end (their grace period), not for room that may never come.
func unschedulable(p *corev1.Pod) (stuckWorker, bool) {
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending || p.Status.NominatedNodeName != "" {
		return stuckWorker{}, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			since := c.LastTransitionTime.Time
			if since.IsZero() {
				since = p.CreationTimestamp.Time
			}
			return stuckWorker{worker: workerIndex(p), pod: p.Name, since: since, message: c.Message}, true
		}
	}
	return stuckWorker{}, false
}

// resize is a decision to run the gang with another number of workers.
type resize struct {
	from, to int
	why      string
	// lost are the lost nodes a shrink went without: the gang grows back once one of
	// them is ready again.
	lost []string
}

// shrinkRule is when an elastic gang of size workers, which may run with as few as min,
// goes on without its stuck workers: once each has been unschedulable for settle, or at
// the attempt's pre-running deadline (spec.preRunningDeadlineSeconds; zero: none), which
// would otherwise fail the job.
type shrinkRule struct {
	workers, min int
	settle       time.Duration
	deadline     time.Time
}

// planShrink decides whether a gang goes on without its stuck workers, as rule says, when
// at least rule.min remain. lostOn names the lost node each replaced worker's pod was on,
// for the reason; lost are the nodes the status recorded, which it names when lostOn
// knows none of the stuck workers (an operator that restarted since). Otherwise it
// returns how long to wait before deciding again (0: nothing will change by waiting: no
// worker is stuck, or too few would remain).
func planShrink(stuck []stuckWorker, rule shrinkRule, now time.Time, lostOn map[int]string, lost []string) (resize, time.Duration, bool) {
	workers := rule.workers
	if len(stuck) == 0 || rule.min >= workers || workers-len(stuck) < rule.min {
		return resize{}, 0, false
	}
	var wait time.Duration
	for _, w := range stuck {
		wait = max(wait, w.since.Add(rule.settle).Sub(now))
	}
	how := "for " + rule.settle.String()
	if !rule.deadline.IsZero() && wait > 0 {
		if left := rule.deadline.Sub(now); left <= 0 {
			wait, how = 0, "by the attempt's pre-running deadline"
		} else {
			wait = min(wait, left)
		}
	}
	if wait > 0 {
		return resize{}, wait, false
	}
	r := resize{from: workers, to: workers - len(stuck)}
	var nodes []string
	ids := make([]string, 0, len(stuck))
	for _, w := range stuck {
		ids = append(ids, fmt.Sprint(w.worker))
		if n := lostOn[w.worker]; n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		nodes = slices.Clone(lost)
	}
	slices.Sort(nodes)
	r.lost = nodes
	what := "worker " + ids[0] + " cannot"
	if len(ids) > 1 {
		what = "workers " + strings.Join(ids, ", ") + " cannot"
	}
	r.why = lostWhy(nodes) + fmt.Sprintf("%s be scheduled %s (%s)", what, how, stuck[0].message)
	return r, 0, true
}

// lostWhy is the start of a resize's reason that names the lost nodes.
func lostWhy(nodes []string) string {
	switch len(nodes) {
	case 0:
		return ""
	case 1:
		return "node " + nodes[0] + " lost; "
	default:
		return "nodes " + strings.Join(nodes, ", ") + " lost; "
	}
}

// shrinkStuck resizes an elastic gang whose stuck workers planShrink gives up on, in place
// when it can (dropinplace.go), else on new pods, and reports whether it did.
func (s *step) shrinkStuck(ctx context.Context, o observation) (bool, error) {
	rule := shrinkRule{workers: s.gangSize(), min: s.job.Spec.MinWorkerCount(), settle: s.r.Options.elasticSettle()}
	if d, st := s.job.Spec.PreRunningDeadlineSeconds, s.job.Status.AttemptStartTime; d != nil && st != nil {
		rule.deadline = st.Add(time.Duration(*d) * time.Second)
	}
	r, wait, ok := planShrink(o.stuck, rule, s.now, s.r.lostNodes(s.job.UID), s.job.Status.LostNodes)
	if !ok {
		if wait > 0 {
			s.requeue(wait)
		}
		return false, nil
	}
	s.sliceMissed()
	switch err := s.shrinkInPlace(ctx, r, o); {
	case errors.Is(err, errNoDropInPlace):
		s.resized(r)
	case err != nil:
		return false, err
	}
	return true, nil
}

// resized records that the gang restarts at size r.to as the next attempt, from its
// latest checkpoint: the status first (status.workers, the attempt), so the next
// reconcile tears the current attempt down and makes the new one with r.to workers. A
// resize is not a failure: it uses no restart and no disruption.
func (s *step) resized(r resize) {
	st := &s.job.Status
	n := st.Attempt
	st.Workers = int32(r.to)
	switch {
	case r.to >= s.job.Spec.WorkerCount():
		st.Workers, st.LostNodes = 0, nil
	case r.to < r.from:
		st.LostNodes = r.lost
	}
	newPods(st)
	if st.Workers > 0 && s.queueName() == "" {
		s.dropFromStart()
	}
	st.Phase, st.WorkersReady, st.AttemptStartTime = v1.PhaseRestarting, 0, nil
	msg := fmt.Sprintf("resized from %d to %d workers: %s; attempt %d ends and the gang restarts as attempt %d from its latest checkpoint (a resize uses no restart)",
		r.from, r.to, r.why, n, st.Attempt)
	s.condition(v1.CondRestarting, true, ReasonResized, msg)
	s.announceResize(msg)
}

// dropFromStart has the gang's new pod set keep every index, those above its size
// dropped from the start (no pod, TRAINYARD_DROPPED_WORKERS in the others), so that the
// gang can grow in place.
func (s *step) dropFromStart() {
	for w := s.gangSize(); w < s.job.Spec.WorkerCount(); w++ {
		s.job.Status.DroppedWorkers = append(s.job.Status.DroppedWorkers, int32(w))
	}
}

// announceResize tells of a resize, in the status's reason, the Running condition and an
// Event, and forgets what the reconciler remembered of the gang's lost nodes and room.
func (s *step) announceResize(msg string) {
	s.job.Status.Reason = msg
	s.condition(v1.CondRunning, false, ReasonResized, msg)
	s.event(corev1.EventTypeNormal, ReasonResized, msg)
	uid := s.job.UID
	s.afterWrite(func() {
		s.r.lostOn.Delete(uid)
		s.r.shrunk.Delete(uid)
		s.r.readmitting.Delete(uid)
	})
	s.requeue(teardownPoll)
}

// growPoll is how often a gang shrunk for lost nodes looks whether one is back.
const growPoll = 10 * time.Second

// shrunk is what the reconciler remembers of a gang it shrank for lost nodes (the nodes
// are in status.lostNodes) while it waits to grow back: back is when one of them was
// first seen ready again (zero while none is), and checkpoint the gang's latest
// checkpoint then. It is in memory: an operator that restarts in between waits for the
// next checkpoint from when it sees the node ready.
type shrunk struct {
	back       time.Time
	checkpoint string
}

// planGrow decides whether a gang shrunk for the lost nodes grows back: once one of them
// is ready again, when growWhen says. It returns what to remember, the node that is back,
// and when to look again.
func planGrow(sh shrunk, nodes []string, ready func(string) bool, checkpoint string, interval time.Duration, now time.Time) (next shrunk, node string, wait time.Duration, grow bool) {
	node = firstReady(nodes, ready)
	if node == "" {
		return shrunk{}, "", growPoll, false
	}
	next, wait, grow = growWhen(sh, checkpoint, interval, now)
	return next, node, wait, grow
}

// growWhen decides when a gang that has found room (a lost node back, room probes
// placed) grows: at its next checkpoint committed after the room was first found
// (checkpoint differs from the one then) or interval later, whichever comes first, as the
// job server grows a gang. sh is what was remembered of the room (zero: found now).
func growWhen(sh shrunk, checkpoint string, interval time.Duration, now time.Time) (next shrunk, wait time.Duration, grow bool) {
	next = sh
	if next.back.IsZero() {
		next.back, next.checkpoint = now, checkpoint
	}
	if checkpoint != next.checkpoint || !now.Before(next.back.Add(interval)) {
		return next, 0, true
	}
	return next, next.back.Add(interval).Sub(now), false
}

// growBack grows a running gang that was shrunk for lost nodes back to spec.workers once
// one of them is ready again: in place at once when it shrank in place (growinplace.go;
// worker 0 then grows at its next checkpoint), else on new pods when planGrow says so. It
// reports whether it did. A gang in a Kueue queue does not grow: Kueue never lets a
// Workload take back the pods it gave back (status.reclaimablePods) while admitted, so it
// grows at its next admission.
func (s *step) growBack(ctx context.Context, o observation) (bool, error) {
	st := &s.job.Status
	if st.Workers == 0 || len(st.LostNodes) == 0 || s.queueName() != "" || s.restartingInPlace() || s.readmitPending() {
		return false, nil
	}
	var sh shrunk
	if v, ok := s.r.shrunk.Load(s.job.UID); ok {
		sh = v.(shrunk)
	}
	down := s.r.nodeDown(ctx)
	ready := func(n string) bool { return !down(n) }
	if s.growsInPlace() {
		if node := firstReady(st.LostNodes, ready); node != "" {
			g := readmitRoom{workers: s.toReadmit(s.job.Spec.WorkerCount() - s.gangSize()), why: fmt.Sprintf("node %s is ready again", node)}
			switch _, err := s.growInPlace(ctx, g, o); {
			case err == nil:
				return true, nil // taken, or refused for now: look again
			case !errors.Is(err, errNoDropInPlace):
				return false, err
			}
		}
	}
	next, node, wait, grow := planGrow(sh, st.LostNodes, ready, st.LatestCheckpoint, s.job.Spec.ResizeInterval(), s.now)
	if !grow {
		s.r.shrunk.Store(s.job.UID, next)
		s.requeue(wait)
		return false, nil
	}
	when := "at its next checkpoint"
	if next.checkpoint == st.LatestCheckpoint {
		when = fmt.Sprintf("after the resize interval (%s)", s.job.Spec.ResizeInterval())
	}
	s.resized(resize{from: s.gangSize(), to: s.job.Spec.WorkerCount(),
		why: fmt.Sprintf("node %s is ready again (since %s); growing %s", node, next.back.UTC().Format(time.RFC3339), when)})
	return true, nil
}

// firstReady is the first of nodes that is ready, or "".
func firstReady(nodes []string, ready func(string) bool) string {
	for _, n := range nodes {
		if ready(n) {
			return n
		}
	}
	return ""
}

// noteLostNode remembers that worker's pod was on node when the node was lost, for the
// reason of a resize that follows (in memory: an operator that restarts in between says
// only that the worker cannot be scheduled).
func (r *Reconciler) noteLostNode(job types.UID, worker int, node string) {
	m := map[int]string{}
	if old, ok := r.lostOn.Load(job); ok {
		m = maps.Clone(old.(map[int]string))
	}
	m[worker] = node
	r.lostOn.Store(job, m)
}

// lostNodes are the nodes noteLostNode remembers for a job, by worker.
func (r *Reconciler) lostNodes(job types.UID) map[int]string {
	if m, ok := r.lostOn.Load(job); ok {
		return m.(map[int]string)
	}
	return nil
}

// elasticSettle is ElasticSettle, defaulted.
func (o *Options) elasticSettle() time.Duration {
	if o.ElasticSettle <= 0 {
		return DefaultElasticSettle
	}
	return o.ElasticSettle
}

// kueueSize is the size of a gang Kueue admits through wl: the admission's count, less
// the workers the Workload gives back (status.reclaimablePods, which Kueue subtracts from
// the PodSet's count). A resize the status records (status.workers) that the Workload does
// not show yet is given back first: the quota the smaller gang no longer uses returns to
// the queue at once. Kueue never lets a Workload take back what it gave while admitted, so
// the gang keeps its smaller size until its next admission.
func (s *step) kueueSize(ctx context.Context, wl *unstructured.Unstructured) (int, error) {
	most := s.job.Spec.WorkerCount()
	admitted := admittedWorkers(wl)
	if admitted <= 0 {
		admitted = most
	}
	n := min(admitted, most-reclaimableWorkers(wl))
	if w := int(s.job.Status.Workers); w > 0 && w < n {
		if err := s.updateWorkloadStatus(ctx, wl, func(wl *unstructured.Unstructured, _ *[]metav1.Condition) {
			_ = unstructured.SetNestedSlice(wl.Object, []any{map[string]any{"name": podSetWorkers, "count": int64(most - w)}},
				"status", "reclaimablePods")
		}); err != nil {
			return 0, err
		}
		s.eventNow(corev1.EventTypeNormal, "QuotaReclaimed", fmt.Sprintf(
			"gave %d of the %d admitted workers' quota back to Kueue (Workload %s status.reclaimablePods %d): the gang runs with %d",
			admitted-w, admitted, wl.GetName(), most-w, w))
		n = w
	}
	return n, nil
}

// reclaimableWorkers is how many workers' pods wl gives back to Kueue.
func reclaimableWorkers(wl *unstructured.Unstructured) int {
	pods, _, _ := unstructured.NestedSlice(wl.Object, "status", "reclaimablePods")
	for _, p := range pods {
		m, _ := p.(map[string]any)
		if name, _ := m["name"].(string); name != podSetWorkers {
			continue
		}
		if n, ok, _ := unstructured.NestedInt64(m, "count"); ok {
			return int(n)
		}
	}
	return 0
}
