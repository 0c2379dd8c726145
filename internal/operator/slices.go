package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// An elastic gang in a Kueue queue grows while it runs through Kueue's workload slices
// (its ElasticJobsViaWorkloadSlices feature, alpha since v0.13 and off by default), when
// the TrainJob carries Kueue's own annotation for it, `kueue.x-k8s.io/elastic-job: "true"`,
// as a batch/v1 Job does. Without them, Kueue never lets an admitted Workload take back
// the quota it gave back (status.reclaimablePods), and the gang grows only at its next
// admission.
//
// A gang that runs below spec.workers asks for more with a new slice: a Workload of the
// same PodSet, with count spec.workers and minCount one more than the gang's size (so that
// Kueue's partial admission brings at least one more worker, never the same size again),
// annotated `kueue.x-k8s.io/workload-slice-replacement-for: <namespace>/<current slice>`.
// The slice waits in the queue, the gang training meanwhile, until the quota has room:
// Kueue then finishes the current slice (reason WorkloadSliceReplaced) and admits the new
// one in its place, counting the old slice's quota as its own. The operator makes that
// grow, in place when it can: a gang Kueue admitted fewer workers of keeps a pod set of
// every index, those above its size dropped from the start, so that worker 0 readmits
// them (growinplace.go), else on new pods. The slice is then annotated
// trainyard.dev/slice-grown, after which the gang's resizes count from it again.
//
// A slice is numbered (trainyard.dev/workload-slice; the first is workloadName, the next
// ones add -2, -3, ...). The current slice is the oldest not finished; a newer one not
// finished is the pending one, deleted when the gang stops running below its size. A
// replacing slice that Kueue evicts, or that is not admitted soon after the slice it
// replaced was finished, is finished too: its minCount was the gang's size then, and a
// fresh slice asks for as few as spec.minWorkers again.

// Kueue's annotations and reason for workload slices, and the operator's own.
const (
	// annotationElasticJob turns workload slices on, on a TrainJob and on its Workloads.
	annotationElasticJob = "kueue.x-k8s.io/elastic-job"
	// annotationReplaces names the slice (namespace/name) a new slice replaces.
	annotationReplaces = "kueue.x-k8s.io/workload-slice-replacement-for"
	// wlSliceReplaced is the reason of the Finished condition of a replaced slice.
	wlSliceReplaced = "WorkloadSliceReplaced"
	// annotationSlice is a slice's number, 1 for the first.
	annotationSlice = "trainyard.dev/workload-slice"
	// annotationSliceGrown marks a replacing slice whose grow the gang made.
	annotationSliceGrown = "trainyard.dev/slice-grown"
)

// sliceHandover is how long a gang keeps running after Kueue finished its slice for a new
// one that is not admitted yet (Kueue finishes the old slice first, then admits the new).
const sliceHandover = 30 * time.Second

// sliceState is what getWorkload found of the job's Workload slices.
type sliceState struct {
	next       int                        // the number of the next slice
	pending    *unstructured.Unstructured // a newer slice Kueue has not admitted yet
	replacedAt time.Time                  // when Kueue finished the slice the current one replaced
	growTo     int                        // the size a new slice admits that the gang has not grown to yet
}

// slicing reports whether the job's elastic gang grows through Kueue's workload slices.
func (s *step) slicing() bool {
	return s.job.Annotations[annotationElasticJob] == "true" && s.job.Spec.MinWorkerCount() < s.job.Spec.WorkerCount()
}

// sliceName names slice number n of the job's Workload.
func sliceName(job *v1.TrainJob, n int) string {
	if n <= 1 {
		return workloadName(job)
	}
	return workloadName(job) + "-" + strconv.Itoa(n)
}

// sliceNumber is a Workload's slice number (1 without the annotation).
func sliceNumber(wl *unstructured.Unstructured) int {
	n, err := strconv.Atoi(wl.GetAnnotations()[annotationSlice])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// wlReplaces is the slice (namespace/name) wl replaces, or "".
func wlReplaces(wl *unstructured.Unstructured) string {
	return wl.GetAnnotations()[annotationReplaces]
}

// currentSlice returns the job's current slice, the oldest not finished (nil when none is:
// a fresh one is made), and notes the pending one. When Kueue admitted the pending slice
// beside the current one (its ElasticJobsViaWorkloadSlices feature off, it did not
// replace it), the current one is finished as Kueue would, and the new one is current.
func (s *step) currentSlice(ctx context.Context) (*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(workloadGVK.GroupVersion().WithKind("WorkloadList"))
	if err := s.r.Client.List(ctx, l, client.InNamespace(s.job.Namespace), client.MatchingLabels{workload.LabelJobUID: string(s.job.UID)}); err != nil {
		return nil, fmt.Errorf("list the Workloads of TrainJob %s: %w", s.job.Name, err)
	}
	items := slices.DeleteFunc(l.Items, func(wl unstructured.Unstructured) bool { return !metav1.IsControlledBy(&wl, s.job) })
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int { return sliceNumber(&a) - sliceNumber(&b) })
	s.slice = sliceState{next: 1}
	var live []*unstructured.Unstructured
	for i := range items {
		wl := &items[i]
		s.slice.next = max(s.slice.next, sliceNumber(wl)+1)
		if !wlHasCondition(wl, wlFinished, metav1.ConditionTrue) {
			live = append(live, wl)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	cur := live[0]
	if len(live) > 1 {
		s.slice.pending = live[len(live)-1]
		if wlHasCondition(s.slice.pending, wlQuotaReserved, metav1.ConditionTrue) {
			msg := fmt.Sprintf("replaced by Workload slice %s, which Kueue admitted beside it (is Kueue's ElasticJobsViaWorkloadSlices feature gate on?)",
				s.slice.pending.GetName())
			if err := s.retireSlice(ctx, cur, wlSliceReplaced, msg); err != nil {
				return nil, err
			}
			cur, s.slice.pending, s.slice.replacedAt = s.slice.pending, nil, s.now
			return cur, nil
		}
	}
	if r := wlReplaces(cur); r != "" {
		_, name, _ := strings.Cut(r, "/")
		for i := range items {
			if c := wlCondition(&items[i], wlFinished); items[i].GetName() == name && c != nil && c.Reason == wlSliceReplaced {
				s.slice.replacedAt = c.LastTransitionTime.Time
			}
		}
	}
	return cur, nil
}

// retireSlice finishes a slice the gang no longer uses, which frees its quota.
func (s *step) retireSlice(ctx context.Context, wl *unstructured.Unstructured, reason, msg string) error {
	return s.updateWorkloadStatus(ctx, wl, func(wl *unstructured.Unstructured, conds *[]metav1.Condition) {
		meta.SetStatusCondition(conds, s.wlCondition(wl, wlFinished, metav1.ConditionTrue, reason, msg))
		unsetQuota(s, wl, conds, wlFinished, msg)
	})
}

// handingOver reports whether Kueue has just finished the gang's slice for the current
// one, which it admits next: the gang keeps running meanwhile.
func (s *step) handingOver(wl *unstructured.Unstructured, evicted *metav1.Condition) bool {
	return (evicted == nil || evicted.Status != metav1.ConditionTrue) && wlReplaces(wl) != "" &&
		!wlHasCondition(wl, wlQuotaReserved, metav1.ConditionTrue) && !s.slice.replacedAt.IsZero() &&
		s.now.Sub(s.slice.replacedAt) < sliceHandover
}

// staleSlice reports whether wl is a replacing slice that no longer serves: evicted, or
// not admitted after the handover. It asked for at least the gang's size then; a fresh
// slice asks for spec.minWorkers again.
func staleSlice(wl *unstructured.Unstructured, evicted *metav1.Condition) bool {
	return wlReplaces(wl) != "" && (evicted != nil || !wlHasCondition(wl, wlQuotaReserved, metav1.ConditionTrue))
}

// dropPendingSlice deletes the pending slice: the gang no longer runs below its size.
func (s *step) dropPendingSlice(ctx context.Context) error {
	p := s.slice.pending
	if p == nil {
		return nil
	}
	uid := p.GetUID()
	if err := s.r.Client.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Workload slice %s: %w", p.GetName(), err)
	}
	s.slice.pending = nil
	return nil
}

// sliceGrowth finds the grow a replacing slice admits that the gang has not made
// (s.slice.growTo, which growThroughSlice makes), and reports whether one is owed: the
// gang keeps its size until then, and gives nothing back. Once the status shows the grow,
// the slice is marked grown, and it returns the slice as written.
func (s *step) sliceGrowth(ctx context.Context, wl *unstructured.Unstructured) (bool, *unstructured.Unstructured, error) {
	if !s.slicing() || wlReplaces(wl) == "" || wl.GetAnnotations()[annotationSliceGrown] != "" {
		return false, wl, nil
	}
	most := s.job.Spec.WorkerCount()
	to := admittedWorkers(wl)
	if to <= 0 || to > most {
		to = most
	}
	if s.gangSize() < to {
		s.slice.growTo = to
		return true, wl, nil
	}
	wl = wl.DeepCopy()
	notes := wl.GetAnnotations()
	notes[annotationSliceGrown] = "true"
	wl.SetAnnotations(notes)
	if err := s.r.Client.Update(ctx, wl); err != nil {
		return false, nil, fmt.Errorf("mark Workload slice %s grown: %w", wl.GetName(), err)
	}
	return false, wl, nil
}

// keepEveryIndex gives a slicing gang Kueue admitted fewer than spec.workers of a pod set
// of every index, those above its size dropped from the start (no pod,
// TRAINYARD_DROPPED_WORKERS), so that it grows in place. It reports whether it changed the
// status, which is then written before the pods are made.
func (s *step) keepEveryIndex() bool {
	st := &s.job.Status
	if !s.slicing() || st.Workers == 0 || len(st.DroppedWorkers) > 0 || s.kids.made(s.podsAttempt()) {
		return false
	}
	s.dropFromStart()
	return true
}

// growThroughSlice grows the gang to the size its new slice admits, in place when it can,
// else on new pods, and reports whether it did.
func (s *step) growThroughSlice(ctx context.Context, o observation) (bool, error) {
	from, to := s.gangSize(), s.slice.growTo
	if to <= from || s.restartingInPlace() || s.readmitPending() {
		return false, nil
	}
	why := fmt.Sprintf("Kueue admitted %d workers through Workload slice %s", to, s.workload.GetName())
	if s.growsInPlace() {
		switch _, err := s.growInPlace(ctx, readmitRoom{workers: s.toReadmit(to - from), why: why}, o); {
		case err == nil:
			return true, nil
		case !errors.Is(err, errNoDropInPlace):
			return false, err
		}
	}
	s.resized(resize{from: from, to: to, why: why})
	return true, nil
}

// sliceWait is when a slicing gang that shrank for want of room may ask for a slice again.
type sliceWait struct {
	misses int
	next   time.Time
}

// sliceMissed notes that a slicing gang shrinks because workers cannot be placed: Kueue's
// quota may have room where the nodes have none, and a slice asked for at once would bring
// back workers that cannot be placed either. The next slice waits 1, 2, 4, ... up to 10
// minutes after each such shrink, as room probes do, until the gang runs at its full size.
func (s *step) sliceMissed() {
	if !s.slicing() {
		return
	}
	var w sliceWait
	if v, ok := s.r.sliceWait.Load(s.job.UID); ok {
		w = v.(sliceWait)
	}
	w.misses++
	w.next = s.now.Add(retryAfter(w.misses))
	s.r.sliceWait.Store(s.job.UID, w)
}

// askForSlice asks Kueue for room to grow a slicing gang that runs below spec.workers: a
// new slice that replaces the current one once admitted. A gang at its full size no
// longer needs its pending slice.
func (s *step) askForSlice(ctx context.Context) error {
	st := &s.job.Status
	if !s.slicing() || s.workload == nil {
		return nil
	}
	if st.Workers == 0 {
		s.r.sliceWait.Delete(s.job.UID) // at its full size: a later shrink waits from the start
		return s.dropPendingSlice(ctx)
	}
	if s.slice.pending != nil || s.slice.growTo > 0 || st.Phase != v1.PhaseRunning || s.restartingInPlace() || s.readmitPending() {
		return nil
	}
	if v, ok := s.r.sliceWait.Load(s.job.UID); ok && s.now.Before(v.(sliceWait).next) {
		s.requeue(v.(sliceWait).next.Sub(s.now))
		return nil
	}
	from := s.gangSize()
	wl, err := s.newWorkload(ctx, s.slice.next, from+1)
	if err != nil || wl == nil {
		return err
	}
	notes := wl.GetAnnotations()
	notes[annotationReplaces] = s.job.Namespace + "/" + s.workload.GetName()
	wl.SetAnnotations(notes)
	if err := s.r.Client.Create(ctx, wl); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // a stale read of the slices: this one was asked for
		}
		return fmt.Errorf("create Workload slice %s: %w", wl.GetName(), err)
	}
	s.eventNow(corev1.EventTypeNormal, "WorkloadSliceCreated", fmt.Sprintf(
		"the gang runs with %d of %d workers: asked Kueue for more through Workload slice %s (%d to %d workers), which replaces %s once admitted",
		from, s.job.Spec.WorkerCount(), wl.GetName(), from+1, s.job.Spec.WorkerCount(), s.workload.GetName()))
	return nil
}
