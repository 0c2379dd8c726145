package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gangroom"
	"github.com/trainyard/trainyard/internal/workload"
)

// A gang is placed whole, never in part (issue: two gangs made together split a node's
// GPUs and both wait forever). Where the cluster serves the scheduler's own gang
// scheduling (scheduling.k8s.io/v1beta1 PodGroups, podgroup.go), each attempt's pods form
// one PodGroup and the scheduler binds them together. Where it does not, and the job is
// in no Kueue queue (Kueue admits a gang whole), the operator keeps to the rules of
// internal/gangroom: here it builds their view of every gang from the cache, lets a gang
// make its pods (placeGang) and gives back the room of a gang placed in part
// (giveBackRoom). What must survive an operator restart is in the status: a gang that
// gave its room back has status.givenBack and the condition WaitingForRoom (since when);
// the rest is memory that only speeds things up (gangMemory).

// Gang placement modes (Options.GangPlacement).
const (
	// GangPlacementAuto uses PodGroups where the cluster serves them, else the operator's
	// rules.
	GangPlacementAuto = "auto"
	// GangPlacementOperator uses the operator's rules even where PodGroups are served.
	GangPlacementOperator = "operator"
	// GangPlacementOff leaves placement to the scheduler, pod by pod.
	GangPlacementOff = "off"
)

// GangPlacements are the values Options.GangPlacement takes.
var GangPlacements = []string{GangPlacementAuto, GangPlacementOperator, GangPlacementOff}

// gangMemory is what the operator remembers of gang placement between reconciles: the
// gangs it let make their pods, until the cache shows them, and the times room was freed.
// An operator that restarts loses it: a gang it let place counts as placing once its
// pods are in the cache, and every waiting gang counts room as freed.
type gangMemory struct {
	mu sync.Mutex
	// placing holds when each gang was let make its pods.
	placing map[types.UID]time.Time
	// freed counts the times room was freed (a gang ended, was suspended or deleted);
	// gaveBack holds its value when each waiting gang gave its room back.
	freed    uint64
	gaveBack map[types.UID]uint64
	// priorities caches PriorityClass values by name.
	priorities map[string]priorityMemo
}

type priorityMemo struct {
	value int32
	at    time.Time
}

// placingFor is how long the operator counts a gang it let make pods as placing when
// the cache does not show them all yet (a failed create, a slow cache).
const placingFor = 10 * time.Second

// priorityFor is how long a PriorityClass's value is remembered.
const priorityFor = time.Minute

func (m *gangMemory) init() {
	if m.placing == nil {
		m.placing, m.gaveBack, m.priorities = map[types.UID]time.Time{}, map[types.UID]uint64{}, map[string]priorityMemo{}
	}
}

// roomFreed records that room was freed: waiting gangs try again.
func (r *Reconciler) roomFreed() {
	r.gangs.mu.Lock()
	defer r.gangs.mu.Unlock()
	r.gangs.freed++
}

// forgetGang drops what the operator remembers of a gang's placement.
func (r *Reconciler) forgetGang(uid types.UID) {
	r.gangs.mu.Lock()
	defer r.gangs.mu.Unlock()
	r.gangs.init()
	delete(r.gangs.placing, uid)
	delete(r.gangs.gaveBack, uid)
}

// operatorPlaces reports whether the operator's rules place job's gang: no Kueue queue,
// no PodGroups, and placement not turned off.
func (r *Reconciler) operatorPlaces(job *v1.TrainJob) bool {
	return jobQueue(job) == "" && !r.PodGroups && r.Options.gangPlacement() != GangPlacementOff
}

// placeGang reports whether the job's next attempt may make its pods now. When it may not,
// the status says what it waits for.
func (s *step) placeGang(ctx context.Context) (bool, error) {
	if !s.r.operatorPlaces(s.job) {
		return true, nil
	}
	m := &s.r.gangs
	m.mu.Lock()
	defer m.mu.Unlock()
	g, d, err := s.decideGang(ctx)
	if err != nil {
		return false, err
	}
	if d.Action == gangroom.Start {
		m.placing[s.job.UID] = s.now
		delete(m.gaveBack, s.job.UID)
		if s.condition(v1.CondWaitingForRoom, false, "Placing", fmt.Sprintf("attempt %d: making its pods", s.job.Status.Attempt)) &&
			g.State == gangroom.Waiting {
			s.event(corev1.EventTypeNormal, "Placing", fmt.Sprintf("attempt %d: trying again to place the gang", s.job.Status.Attempt))
		}
		return true, nil
	}
	st := &s.job.Status
	reason := v1.ReasonWaitingForGang
	if g.State == gangroom.Waiting {
		reason = meta.FindStatusCondition(st.Conditions, v1.CondWaitingForRoom).Reason // Waiting: it is there
	}
	msg := fmt.Sprintf("attempt %d: %s", st.Attempt, d.Why)
	st.Reason = msg
	s.condition(v1.CondRunning, false, reason, msg)
	retry := d.Retry
	if retry <= 0 {
		retry = 2 * time.Second
	}
	s.requeue(retry)
	return false, nil
}

// decideGang is what the rules decide for this job's gang, given every gang the operator
// places; the caller holds r.gangs.mu.
func (s *step) decideGang(ctx context.Context) (gangroom.Gang, gangroom.Decision, error) {
	s.r.gangs.init()
	all, err := s.r.gangViews(ctx, s.now)
	if err != nil {
		return gangroom.Gang{}, gangroom.Decision{}, err
	}
	g := s.gangView(all)
	return g, gangroom.DefaultRules.Decide(g, all, s.now), nil
}

// gangView is this job's gang among all, before its attempt makes pods.
func (s *step) gangView(all []gangroom.Gang) gangroom.Gang {
	key := s.job.Namespace + "/" + s.job.Name
	for _, g := range all {
		if g.Key == key {
			return g
		}
	}
	return gangroom.Gang{Key: key, Created: s.job.CreationTimestamp.Time, State: gangroom.New, Kind: gangKind(s.job)}
}

// gangKind is the scarce resource job's workers need: gangs of one kind wait for each
// other only.
func gangKind(job *v1.TrainJob) string {
	if job.Spec.Resources.GPU > 0 {
		return string(workload.GPUResource)
	}
	return ""
}

// giveBackRoom gives back the room of a gang placed in part, when the rules say so: the
// status first (a new attempt, not a restart: status.givenBack), so the next reconcile
// tears the pods down (waitTeardown) and waits in placeGang. When it keeps its room, it
// returns what the gang waits for ("" when the rules have nothing to say).
func (s *step) giveBackRoom(ctx context.Context, o observation) (bool, string, error) {
	if !s.r.operatorPlaces(s.job) || len(o.stuck) == 0 || s.restartingInPlace() {
		return false, "", nil
	}
	m := &s.r.gangs
	m.mu.Lock()
	defer m.mu.Unlock()
	_, d, err := s.decideGang(ctx)
	if err != nil {
		return false, "", err
	}
	if d.Retry > 0 {
		s.requeue(d.Retry)
	}
	if d.Action != gangroom.GiveBack {
		return false, d.Why, nil
	}
	st := &s.job.Status
	n := st.Attempt
	reason := v1.ReasonNoRoom
	if d.Other != "" {
		reason = v1.ReasonGaveWay
	}
	why := d.Why + stuckSummary(o.stuck)
	newPods(st)
	st.GivenBack++
	st.Phase, st.WorkersReady, st.AttemptStartTime = v1.PhasePending, 0, nil
	msg := fmt.Sprintf("attempt %d %s; attempt %d waits for room (not a restart)", n, why, st.Attempt)
	st.Reason = msg
	s.condition(v1.CondWaitingForRoom, true, reason, msg)
	s.condition(v1.CondRunning, false, reason, msg)
	s.event(corev1.EventTypeNormal, reason, msg)
	m.gaveBack[s.job.UID] = m.freed
	delete(m.placing, s.job.UID)
	s.requeue(teardownPoll)
	return true, "", nil
}

// stuckSummary says what the scheduler said of the first stuck worker.
func stuckSummary(stuck []stuckWorker) string {
	if len(stuck) == 0 {
		return ""
	}
	w := stuck[0]
	return fmt.Sprintf(" (worker %d's pod %s: %s)", w.worker, w.pod, strings.TrimSpace(w.message))
}

// neverPlaced says which workers the scheduler never placed and why, for the message of
// an attempt that ended while they waited ("" when none did).
func neverPlaced(stuck []stuckWorker) string {
	if len(stuck) == 0 {
		return ""
	}
	var pods []string
	for _, w := range stuck {
		pods = append(pods, fmt.Sprintf("worker %d (pod %s)", w.worker, w.pod))
	}
	return fmt.Sprintf("; the scheduler never placed %s: %s", strings.Join(pods, ", "), strings.TrimSpace(stuck[0].message))
}

// gangViews are the gangs the operator places, from the cache and its memory; the
// caller holds r.gangs.mu.
func (r *Reconciler) gangViews(ctx context.Context, now time.Time) ([]gangroom.Gang, error) {
	var jobs v1.TrainJobList
	if err := r.Client.List(ctx, &jobs); err != nil {
		return nil, fmt.Errorf("list TrainJobs for gang placement: %w", err)
	}
	var out []gangroom.Gang
	for i := range jobs.Items {
		job := &jobs.Items[i]
		st := &job.Status
		if job.DeletionTimestamp != nil || st.Phase.Finished() || job.Spec.Suspend || !r.operatorPlaces(job) {
			continue
		}
		g := gangroom.Gang{Key: job.Namespace + "/" + job.Name, Created: job.CreationTimestamp.Time, Kind: gangKind(job),
			Priority: r.priority(ctx, job, now), GivenBack: int(st.GivenBack),
			Need: min(job.Spec.MinWorkerCount(), job.GangSize()), Workers: job.GangSize()}
		if st.Phase == v1.PhaseRunning {
			g.State, g.Bound = gangroom.Placed, g.Workers
			g.Holds = holdsString(job, g.Bound)
			out = append(out, g)
			continue
		}
		pods, err := r.attemptPods(ctx, job)
		if err != nil {
			return nil, err
		}
		r.gangState(&g, job, pods, now)
		out = append(out, g)
	}
	return out, nil
}

// attemptPods lists the pods of the job's current attempt from the cache.
func (r *Reconciler) attemptPods(ctx context.Context, job *v1.TrainJob) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingFields{uidIndex: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("list the pods of TrainJob %s: %w", job.Name, err)
	}
	n := int(job.Status.PodsAttempt)
	if n == 0 {
		n = int(job.Status.Attempt)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return attemptLabel(p.Labels) != n || p.Labels[LabelRoomProbe] != "" || p.DeletionTimestamp != nil
	}), nil
}

// gangState fills in g's state from its attempt's pods and the operator's memory.
func (r *Reconciler) gangState(g *gangroom.Gang, job *v1.TrainJob, pods []corev1.Pod, now time.Time) {
	m := &r.gangs
	placingSince, placing := m.placing[job.UID]
	if len(pods) == 0 {
		switch {
		case placing && now.Sub(placingSince) < placingFor:
			g.State, g.Since = gangroom.Placing, placingSince
		case gaveBack(job):
			g.State, g.Since = gangroom.Waiting, meta.FindStatusCondition(job.Status.Conditions, v1.CondWaitingForRoom).LastTransitionTime.Time
			at, ok := m.gaveBack[job.UID]
			g.RoomFreed = !ok || at != m.freed
		default:
			g.State = gangroom.New
		}
		return
	}
	var stuck []stuckWorker
	for i := range pods {
		p := &pods[i]
		if bound(p) {
			g.Bound++
		} else if w, ok := unschedulable(p); ok {
			stuck = append(stuck, w)
		}
	}
	g.Holds = holdsString(job, g.Bound)
	switch {
	case g.Bound >= g.Need:
		g.State = gangroom.Placed
	case len(stuck) > 0 && g.Bound+len(stuck) >= len(pods):
		g.State = gangroom.Short
		g.Since = stuck[0].since
		for _, w := range stuck[1:] {
			g.Since = latest(g.Since, w.since)
		}
		g.Since = latest(g.Since, newestBinding(pods))
	default:
		// Made, and the scheduler has not said yet: placing, for placingFor at most (a
		// scheduler that never answers, pods held by scheduling gates, block nobody).
		g.Since = latest(placingSince, newestPod(pods))
		g.State = gangroom.Placing
		if now.Sub(g.Since) >= placingFor {
			g.State = gangroom.Short
		}
	}
	if len(pods) >= g.Workers {
		delete(m.placing, job.UID) // the cache shows them all: the pods tell from now on
	}
}

// bound reports whether p is on a node.
func bound(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" || p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// newestPod is when the newest of pods was made.
func newestPod(pods []corev1.Pod) time.Time {
	var t time.Time
	for _, p := range pods {
		t = latest(t, p.CreationTimestamp.Time)
	}
	return t
}

// newestBinding is when the latest of pods was scheduled.
func newestBinding(pods []corev1.Pod) time.Time {
	var t time.Time
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				t = latest(t, c.LastTransitionTime.Time)
			}
		}
	}
	return t
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// gaveBack reports whether job's gang gave its room back and waits to try again.
func gaveBack(job *v1.TrainJob) bool {
	c := meta.FindStatusCondition(job.Status.Conditions, v1.CondWaitingForRoom)
	return c != nil && c.Status == metav1.ConditionTrue && (c.Reason == v1.ReasonGaveWay || c.Reason == v1.ReasonNoRoom)
}

// holdsString says what n bound workers of job hold: "2 GPUs", or "".
func holdsString(job *v1.TrainJob, n int) string {
	switch gpus := n * int(job.Spec.Resources.GPU); gpus {
	case 0:
		return ""
	case 1:
		return "1 GPU"
	default:
		return fmt.Sprintf("%d GPUs", gpus)
	}
}

// priority is the value of the job's PriorityClass (0 without one, or when it cannot be
// read).
func (r *Reconciler) priority(ctx context.Context, job *v1.TrainJob, now time.Time) int32 {
	k := job.Spec.Kubernetes
	if k == nil || k.PriorityClassName == "" || r.Reader == nil {
		return 0
	}
	m := &r.gangs
	if p, ok := m.priorities[k.PriorityClassName]; ok && now.Sub(p.at) < priorityFor {
		return p.value
	}
	var cls schedulingv1.PriorityClass
	value := int32(0)
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: k.PriorityClassName}, &cls); err == nil {
		value = cls.Value
	}
	m.priorities[k.PriorityClassName] = priorityMemo{value: value, at: now}
	return value
}
