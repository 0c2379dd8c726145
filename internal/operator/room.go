package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// An elastic gang shrunk because the scheduler had no room for some workers grows back
// when room returns, wherever it does (growBack also waits for the lost nodes to return). Only the scheduler
// knows whether a worker would fit now (resources, node selectors, affinity, taints), and
// tearing a running gang down to find out would cost it an attempt each time, so the
// operator asks with room probes: one pod per missing worker with the scheduling parts of a
// worker's pod (resources, node selector, affinity, tolerations, volumes) and the pause
// image in place of every container, at the cluster's default priority (0 without a
// default PriorityClass, not the workers' class), so they find free room, not room they
// would take from pods at that priority or above; or in Options.RoomProbePriorityClass,
// which `trainyard install` makes with value 0 and preemptionPolicy Never, so they take
// no room from any pod. Probes
// the scheduler places hold that room until the gang grows, at its next checkpoint or the
// resize interval later, as growBack waits; then they are deleted and the gang restarts
// with the workers they found room for. Probes still unplaced after the elastic settle time
// are deleted, and the operator asks again later, waiting twice as long each time (from
// roomRetryMin up to roomRetryMax). The probes are the operator's only record: an operator
// that restarts finds them by their label.

// LabelRoomProbe marks a room probe pod.
const LabelRoomProbe = "trainyard.dev/room-probe"

// ReasonRoomProbesRefused is the reason of the Event when the API server refuses the room
// probes (a ResourceQuota they would exceed, an admission policy): the operator asks again
// later, as when they find no room.
const ReasonRoomProbesRefused = "RoomProbesRefused"

// DefaultRoomProbeImage is the image of a room probe's containers when
// Options.RoomProbeImage is empty: the pause image every node already has for its pods'
// sandboxes.
const DefaultRoomProbeImage = "registry.k8s.io/pause:3.10"

// How long the operator waits before it probes again after probes found no room.
const (
	roomRetryMin = time.Minute
	roomRetryMax = 10 * time.Minute
)

// roomProbeImage is Options.RoomProbeImage, defaulted.
func (o *Options) roomProbeImage() string {
	if o.RoomProbeImage == "" {
		return DefaultRoomProbeImage
	}
	return o.RoomProbeImage
}

// roomProbe is the probe pod called name that asks whether there is room for a worker
// like the pod worker: the worker's scheduling constraints (its claims among its volumes),
// with every container the pause image and nothing of the job's (command, environment,
// mounts, Secrets, service account token) in it.
// class is the probe's PriorityClass ("": the cluster's default priority).
func roomProbe(worker *corev1.Pod, name, image, class string) *corev1.Pod {
	spec := worker.Spec.DeepCopy()
	spec.Hostname, spec.Subdomain, spec.NodeName = "", "", ""
	spec.RestartPolicy = corev1.RestartPolicyNever
	// The probes' class, or the cluster's default priority (0 without a default
	// PriorityClass), so a probe preempts nothing at that priority or above: it looks for
	// free room. (The priority admission takes the value and the preemption policy from
	// the class, or refuses the pod.)
	spec.PriorityClassName, spec.Priority, spec.PreemptionPolicy = class, nil, nil
	spec.AutomountServiceAccountToken = ptr(false)
	spec.EnableServiceLinks = ptr(false)
	spec.TerminationGracePeriodSeconds = ptr(int64(0))
	spec.ActiveDeadlineSeconds = nil
	pause := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: c.Resources, Ports: c.Ports, SecurityContext: c.SecurityContext, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	spec.InitContainers, spec.Containers = pause(spec.InitContainers), pause(spec.Containers)
	// Only claims bear on where a pod may go (their volumes' topology); Secrets, the gang's
	// among them, config and tokens stay out of a pod that needs none.
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.PersistentVolumeClaim == nil && v.Ephemeral == nil
	})
	labels := map[string]string{LabelRoomProbe: "true"}
	for _, k := range []string{workload.LabelManagedBy, workload.LabelJob, workload.LabelJobUID} {
		labels[k] = worker.Labels[k]
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: worker.Namespace, Labels: labels,
			OwnerReferences: worker.OwnerReferences},
		Spec: *spec,
	}
}

// roomPlan is what planRoom decides.
type roomPlan struct {
	create int           // probes to create
	grow   int           // workers the placed probes found room for: grow by as many now
	drop   bool          // delete the probes (none placed after the settle time, or a grow)
	wait   time.Duration // look again this soon
	nodes  []string      // the nodes the placed probes are on
	// atCheckpoint: the grow comes with a checkpoint committed since the room was found,
	// not at the end of the resize interval.
	atCheckpoint bool
}

// roomMemory is what the reconciler remembers of a gang's probing: when it may probe
// again after probes that found no room, how many such rounds there were, and when the
// placed probes found room and the gang's latest checkpoint then (growWhen).
type roomMemory struct {
	next   time.Time
	misses int
	found  shrunk
}

// planRoom decides what a gang missing workers does with its live room probes: with none
// and the retry time passed, create one per missing worker (and the probes of workers
// lost while none is placed yet); when all are placed, or some
// after the settle time, grow by as many when growWhen says; when none is placed after
// the settle time, delete them and try again later, waiting twice as long each time.
func planRoom(probes []corev1.Pod, missing int, mem roomMemory, checkpoint string, settle, interval time.Duration, now time.Time) (roomPlan, roomMemory) {
	if len(probes) == 0 {
		if wait := mem.next.Sub(now); wait > 0 {
			return roomPlan{wait: wait}, mem
		}
		return roomPlan{create: missing, wait: growPoll}, mem
	}
	var p roomPlan
	oldest := now
	for _, pod := range probes {
		if pod.Spec.NodeName != "" {
			p.grow++
			p.nodes = append(p.nodes, pod.Spec.NodeName)
		}
		if t := pod.CreationTimestamp.Time; t.Before(oldest) {
			oldest = t
		}
	}
	slices.Sort(p.nodes)
	p.nodes = slices.Compact(p.nodes)
	p.grow = min(p.grow, missing) // a worker came back meanwhile
	settled := !now.Before(oldest.Add(settle))
	switch {
	case p.grow == 0 && !settled && len(probes) < missing:
		// Another worker was lost while the round waits: it gets its probe in the round.
		return roomPlan{create: missing, wait: growPoll}, mem
	case p.grow == 0 && settled:
		mem = missed(mem, now)
		return roomPlan{drop: true, wait: mem.next.Sub(now)}, mem
	case p.grow < len(probes) && !settled:
		return roomPlan{wait: oldest.Add(settle).Sub(now)}, mem
	}
	found, wait, grow := growWhen(mem.found, checkpoint, interval, now)
	if !grow {
		mem.found = found
		return roomPlan{wait: wait}, mem
	}
	p.drop, p.atCheckpoint = true, found.checkpoint != checkpoint
	return p, roomMemory{}
}

// missed is mem after a round of probing that found no room: the next round waits twice
// as long as the last, from roomRetryMin up to roomRetryMax.
func missed(mem roomMemory, now time.Time) roomMemory {
	mem.misses++
	mem.next = now.Add(retryAfter(mem.misses))
	mem.found = shrunk{}
	return mem
}

// retryAfter is how long a gang waits to look for room again after misses rounds that
// found none: twice as long each time, from roomRetryMin up to roomRetryMax.
func retryAfter(misses int) time.Duration {
	return min(roomRetryMin<<min(misses-1, 10), roomRetryMax)
}

// growIntoRoom grows a running gang below its size when its room probes found room, and
// reports whether it did. Like growBack, a gang in a Kueue queue does not: Kueue gives the
// room at its next admission.
func (s *step) growIntoRoom(ctx context.Context, o observation) (bool, error) {
	st := &s.job.Status
	missing := s.job.Spec.WorkerCount() - s.gangSize()
	if !s.mayProbe() || missing <= 0 || s.readmitPending() {
		return false, nil
	}
	var mem roomMemory
	if v, ok := s.r.room.Load(s.job.UID); ok {
		mem = v.(roomMemory)
	}
	interval := s.job.Spec.ResizeInterval()
	inPlace := s.growsInPlace()
	if inPlace {
		interval = 0 // the gang trains on while the new pods start; worker 0 grows at its next checkpoint
	}
	plan, mem := planRoom(live(s.kids.probes), missing, mem, st.LatestCheckpoint, s.r.Options.elasticSettle(), interval, s.now)
	s.r.room.Store(s.job.UID, mem)
	if plan.wait > 0 {
		s.requeue(plan.wait)
	}
	if plan.create > 0 {
		err := s.askForRoom(ctx, plan.create, mem)
		return st.Phase.Finished(), err // finished: the pod policy refused the probes
	}
	if plan.grow == 0 {
		if plan.drop {
			return false, s.r.dropProbes(ctx, s.kids.probes)
		}
		return false, nil
	}
	probes := live(s.kids.probes)
	room := fmt.Sprintf("room for %d more worker(s): room probes placed on %s", plan.grow, strings.Join(plan.nodes, ", "))
	if inPlace {
		g := readmitRoom{workers: s.toReadmit(plan.grow), why: room}
		switch took, err := s.growInPlace(ctx, g, o); {
		case err == nil && took:
			s.afterWrite(func() { _ = s.r.dropProbes(context.WithoutCancel(ctx), probes) })
			return true, nil
		case err == nil:
			return true, nil // refused for now: the probes keep the room, and it looks again
		case !errors.Is(err, errNoDropInPlace):
			return false, err
		}
	}
	when := "at its next checkpoint"
	switch {
	case inPlace:
		when = "now (worker 0 cannot grow the gang in place)"
	case !plan.atCheckpoint:
		when = fmt.Sprintf("after the resize interval (%s)", s.job.Spec.ResizeInterval())
	}
	s.resized(resize{from: s.gangSize(), to: s.gangSize() + plan.grow,
		why: room + "; growing " + when})
	s.afterWrite(func() { _ = s.r.dropProbes(context.WithoutCancel(ctx), probes) })
	return true, nil
}

// dropStrayProbes deletes the gang's room probes when the status the step leaves says it
// may not probe (it finished, is suspended, restarts in place), once that status is
// written and only if the TrainJob the step judged is still the one the API server holds.
// A reconcile of a stale TrainJob (the cache behind the operator's own last write) would
// otherwise delete the probes the gang has just made because it still looks as it did
// before: its write conflicts, or, when it changes nothing, the API server's copy is newer.
func (s *step) dropStrayProbes(ctx context.Context) {
	if len(s.kids.probes) == 0 || s.mayProbe() {
		return
	}
	probes := s.kids.probes
	s.afterWrite(func() {
		ctx := context.WithoutCancel(ctx)
		if !s.current(ctx) {
			s.requeue(staleRetry)
			return
		}
		s.r.room.Delete(s.job.UID)
		if err := s.r.dropProbes(ctx, probes); err != nil {
			s.requeue(staleRetry) // and look again
		}
	})
}

// current reports whether the TrainJob the step judged, as it wrote it, is the API
// server's latest: nothing was written to it since the step read it.
func (s *step) current(ctx context.Context) bool {
	var now v1.TrainJob
	err := s.r.Reader.Get(ctx, client.ObjectKeyFromObject(s.job), &now)
	return err == nil && now.ResourceVersion == s.job.ResourceVersion
}

// askForRoom creates n room probes. Probes the API server refuses (a ResourceQuota they
// would exceed, an admission policy) count as a round that found no room, which a retry
// at once would not change: an Event says so and when the operator asks again.
func (s *step) askForRoom(ctx context.Context, n int, mem roomMemory) error {
	err := s.createProbes(ctx, n)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return err
	}
	mem = missed(mem, s.now)
	s.r.room.Store(s.job.UID, mem)
	s.requeue(mem.next.Sub(s.now))
	s.event(corev1.EventTypeWarning, ReasonRoomProbesRefused, fmt.Sprintf("could not ask the scheduler for room for %d more worker(s): %v; asking again in %s",
		n, err, mem.next.Sub(s.now)))
	return nil
}

// mayProbe reports whether the gang may look for room with probes: it runs below its
// size, outside a Kueue queue. A gang shrunk for lost nodes probes too: a node that never
// comes back (a spot node is gone for good; its replacement has another name) must not
// keep the gang small when there is room elsewhere; growBack, which waits for the lost
// nodes, is asked first.
func (s *step) mayProbe() bool {
	st := &s.job.Status
	return st.Phase == v1.PhaseRunning && st.Workers > 0 && s.queueName() == "" && !s.restartingInPlace()
}

// createProbes creates n room probes shaped like the current attempt's worker 0, once the
// pod policy passed them (checkPods; when it refuses them, the job failed).
func (s *step) createProbes(ctx context.Context, n int) error {
	a, err := s.render(ctx, s.podsAttempt())
	if err != nil {
		return err
	}
	worker := a.Pod(0)
	probes := make([]*corev1.Pod, n)
	specs := make([]*corev1.PodSpec, n)
	for i := range n {
		name := fmt.Sprintf("%s-room-%d", s.job.Name, i)
		if len(name) > 63 {
			name = fmt.Sprintf("room-%s-%d", s.job.UID, i)
		}
		probes[i] = roomProbe(worker, name, s.r.Options.roomProbeImage(), s.r.Options.RoomProbePriorityClass)
		specs[i] = &probes[i].Spec
	}
	if ok, err := s.checkPods(ctx, specs...); !ok || err != nil {
		return err
	}
	for _, p := range probes {
		if err := s.r.Client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create room probe %s: %w", p.Name, err)
		}
	}
	return nil
}

// dropProbes deletes room probes, at once (a probe runs nothing of the job's).
func (r *Reconciler) dropProbes(ctx context.Context, probes []corev1.Pod) error {
	for i := range probes {
		p := &probes[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete room probe %s: %w", p.Name, err)
		}
	}
	return nil
}

// live are the pods not being deleted.
func live(pods []corev1.Pod) []corev1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}
