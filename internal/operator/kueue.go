package operator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// A TrainJob in a Kueue queue is Kueue's unit through its job framework for out-of-tree
// kinds (`integrations.externalFrameworks: ["TrainJob.v1alpha1.trainyard.dev"]` in Kueue's
// configuration): the operator does for it what Kueue's jobframework reconciler does for
// the kinds Kueue knows. It makes one Workload per TrainJob, owned by it, with one PodSet of
// the gang's size; no attempt's objects exist until Kueue admits it, and what the
// admission's ResourceFlavors say (node labels, tolerations) goes into the workers. Restarts,
// in place or on new pods, keep the admission. When Kueue evicts the Workload (a preemption,
// a deactivation) the attempt ends as a disruption, and once its pods are gone the operator
// clears the reservation so that Kueue queues the Workload again. A finished TrainJob
// finishes its Workload, which frees the quota; a suspended one deactivates it
// (spec.active false), as Kueue's own integrations do for `kueue.x-k8s.io/active`.
//
// Kueue's Go module is not a dependency (it brings much of Kubernetes with it): the
// Workload is read and written as unstructured, in the version Kueue v0.15 stores.

// Kueue's kinds as the operator reads them.
var (
	workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}
	flavorGVK   = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ResourceFlavor"}
)

// Kueue's Workload conditions and reasons (kueue.x-k8s.io/v1beta2).
const (
	wlQuotaReserved = "QuotaReserved"
	wlAdmitted      = "Admitted"
	wlEvicted       = "Evicted"
	wlFinished      = "Finished"
	wlRequeued      = "Requeued"
	wlPodsReady     = "PodsReady"
	// podSetWorkers is the name of the Workload's one PodSet.
	podSetWorkers = "workers"
)

// newWorkloadObject returns an empty Workload to read into.
func newWorkloadObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workloadGVK)
	return u
}

// queueName is the Kueue LocalQueue of the job: spec.kubernetes.queueName, or Kueue's own
// queue-name label on the TrainJob.
func (s *step) queueName() string { return jobQueue(s.job) }

// jobQueue is the Kueue LocalQueue of job, or "".
func jobQueue(job *v1.TrainJob) string {
	if k := job.Spec.Kubernetes; k != nil && k.QueueName != "" {
		return k.QueueName
	}
	return job.Labels[workload.LabelQueue]
}

// workloadName names the TrainJob's Workload: its name and UID, so a TrainJob made again
// under the same name never takes its predecessor's admission.
func workloadName(job *v1.TrainJob) string {
	name := job.Name
	if len(name) > 200 {
		name = name[:200]
	}
	uid := strings.ReplaceAll(string(job.UID), "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "trainjob-" + name + "-" + uid
}

// getWorkload reads the TrainJob's Workload; nil when there is none (or Kueue is not
// installed). With workload slices it is the oldest slice not finished (slices.go).
func (s *step) getWorkload(ctx context.Context) (*unstructured.Unstructured, error) {
	if !s.r.Kueue {
		return nil, nil
	}
	if s.slicing() {
		return s.currentSlice(ctx)
	}
	s.slice.next = 1
	wl := newWorkloadObject()
	err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.job.Namespace, Name: workloadName(s.job)}, wl)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Workload %s: %w", workloadName(s.job), err)
	}
	if !metav1.IsControlledBy(wl, s.job) {
		return nil, fmt.Errorf("workload %s is not controlled by TrainJob %s", wl.GetName(), s.job.Name)
	}
	if c := wlCondition(wl, wlFinished); c != nil && c.Status == metav1.ConditionTrue && c.Reason == wlSliceReplaced {
		return s.currentSlice(ctx) // the job grew through slices, and its annotation was taken off since
	}
	return wl, nil
}

// kueueGate lets the step make or keep the gang's pods only while Kueue admits the job's
// Workload. Otherwise it makes the Workload, ends an attempt Kueue evicted (a disruption),
// tears down what is left of earlier attempts, gives back an eviction's reservation, and
// says in the status why the gang waits.
func (s *step) kueueGate(ctx context.Context) (admitted bool, err error) {
	if !s.r.Kueue {
		s.waiting("Kueue is not installed: the cluster serves no kueue.x-k8s.io/v1beta2 Workloads (restart the operator after installing Kueue)")
		return false, nil
	}
	wl, err := s.getWorkload(ctx)
	if err != nil {
		return false, err
	}
	if wl == nil {
		if err := s.createWorkload(ctx); err != nil || s.job.Status.Phase.Finished() {
			return false, err
		}
		s.waiting(fmt.Sprintf("waiting: Kueue admitted 0 of %d workers (Workload %s created in LocalQueue %q)",
			s.job.Spec.WorkerCount(), workloadName(s.job), s.queueName()))
		return false, nil
	}
	s.workload = wl
	if !wlActive(wl) && wl.GetAnnotations()[annotationSuspended] != "" {
		// Resumed after a suspension: Kueue may admit it again. A Workload that Kueue or
		// an administrator deactivated stays so, and the gang waits.
		return false, s.setWorkloadActive(ctx, wl, true)
	}
	evicted := wlCondition(wl, wlEvicted)
	if s.handingOver(wl, evicted) {
		s.requeue(time.Second) // Kueue admits the new slice next
		return false, nil
	}
	if evicted != nil && evicted.Status == metav1.ConditionTrue || !wlAdmittedNow(wl) {
		if err := s.dropPendingSlice(ctx); err != nil {
			return false, err
		}
		s.job.Status.Workers = 0 // the next admission says the size
		return false, s.notAdmitted(ctx, wl, evicted)
	}
	owed, wl, err := s.sliceGrowth(ctx, wl)
	if err != nil || owed {
		return owed, err // the gang keeps its size until it grows (growThroughSlice)
	}
	s.workload = wl
	n, err := s.kueueSize(ctx, wl)
	if err != nil {
		return false, err
	}
	s.admittedSize(n)
	if s.keepEveryIndex() {
		s.requeue(time.Millisecond) // the status first, then the pods
		return false, nil
	}
	return true, nil
}

// admittedWorkers is how many workers Kueue's admission of wl counts for the workers
// PodSet: below spec.workers only for an elastic gang partly admitted; 0 when no
// assignment says.
func admittedWorkers(wl *unstructured.Unstructured) int {
	assignments, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	for _, a := range assignments {
		m, _ := a.(map[string]any)
		if name, _ := m["name"].(string); name != podSetWorkers {
			continue
		}
		if n, ok, _ := unstructured.NestedInt64(m, "count"); ok {
			return int(n)
		}
	}
	return 0
}

// admittedSize records the gang's size Kueue admitted in status.workers (0: all of
// spec.workers), saying so when an elastic gang is admitted with fewer.
func (s *step) admittedSize(n int) {
	st, max, min := &s.job.Status, s.job.Spec.WorkerCount(), s.job.Spec.MinWorkerCount()
	if n <= 0 || n >= max || n < min {
		st.Workers = 0
		return
	}
	if int(st.Workers) != n {
		s.event(corev1.EventTypeNormal, "PartlyAdmitted", fmt.Sprintf(
			"Kueue admitted %d of %d workers of the elastic gang (spec.minWorkers %d): it runs with %d", n, max, min, n))
	}
	st.Workers = int32(n)
}

// notAdmitted handles a Workload Kueue does not admit (now): the running attempt ends as a
// disruption, the pods go, the reservation of an eviction is cleared, and the gang waits.
func (s *step) notAdmitted(ctx context.Context, wl *unstructured.Unstructured, evicted *metav1.Condition) error {
	if evicted != nil && evicted.Status != metav1.ConditionTrue {
		evicted = nil
	}
	if slices.Contains(s.kids.attempts(), s.podsAttempt()) {
		why := "Kueue no longer admits the gang"
		if evicted != nil {
			why = fmt.Sprintf("Kueue evicted the gang (%s: %s)", evicted.Reason, evicted.Message)
		}
		return s.attemptEnded(ctx, &failure{worker: -1, disruption: true, reason: why})
	}
	if !s.kids.empty() {
		return s.waitTeardown(ctx)
	}
	if s.slicing() && staleSlice(wl, evicted) {
		msg := fmt.Sprintf("waiting: Kueue admitted 0 of %d workers (Workload slice %s no longer admitted: a fresh one asks for as few as %d)",
			s.job.Spec.WorkerCount(), wl.GetName(), s.job.Spec.MinWorkerCount())
		s.waiting(msg)
		s.requeue(time.Millisecond)
		return s.retireSlice(ctx, wl, "Replaced", msg)
	}
	if evicted != nil && wlHasCondition(wl, wlQuotaReserved, metav1.ConditionTrue) {
		// What jobframework does once an evicted job's pods are gone: Kueue requeues it.
		requeued := evicted.Reason == "Preempted" || evicted.Reason == "NodeFailures"
		if err := s.updateWorkloadStatus(ctx, wl, func(wl *unstructured.Unstructured, conds *[]metav1.Condition) {
			st := metav1.ConditionFalse
			if requeued {
				st = metav1.ConditionTrue
			}
			meta.SetStatusCondition(conds, s.wlCondition(wl, wlRequeued, st, evicted.Reason, evicted.Message))
			unsetQuota(s, wl, conds, "Pending", evicted.Message)
		}); err != nil {
			return err
		}
	}
	s.waiting(s.queuedMessage(wl, evicted))
	return nil
}

// queuedMessage says why Kueue does not admit the gang, in Kueue's words.
func (s *step) queuedMessage(wl *unstructured.Unstructured, evicted *metav1.Condition) string {
	n := s.job.Spec.WorkerCount()
	reserved := wlCondition(wl, wlQuotaReserved)
	if reserved != nil && reserved.Status == metav1.ConditionTrue {
		why := "admission checks pending"
		if a := wlCondition(wl, wlAdmitted); a != nil && a.Message != "" {
			why = a.Message
		}
		return fmt.Sprintf("waiting: Kueue reserved quota for %d workers, not yet admitted (%s)", n, why)
	}
	why := fmt.Sprintf("the Workload %s waits in LocalQueue %q", wl.GetName(), s.queueName())
	switch {
	case !wlActive(wl):
		why = fmt.Sprintf("the Workload %s is deactivated (spec.active false, by Kueue or an administrator)", wl.GetName())
		if evicted != nil {
			why += ": " + evicted.Message
		}
	case reserved != nil && reserved.Message != "":
		why = reserved.Message // "couldn't assign flavors to pod set workers: insufficient quota ..."
	case evicted != nil:
		why = "evicted: " + evicted.Message
	}
	return fmt.Sprintf("waiting: Kueue admitted 0 of %d workers (%s)", n, why)
}

// waiting records in the status that the gang waits for Kueue.
func (s *step) waiting(msg string) {
	st := &s.job.Status
	st.WorkersReady, st.AttemptStartTime, st.Reason = 0, nil, msg
	s.condition(v1.CondRunning, false, v1.ReasonQueued, msg)
}

// createWorkload makes the TrainJob's Workload: one PodSet of the gang's size whose
// template is the worker pod (Kueue counts its resources), in the job's LocalQueue, with
// the priority of its PriorityClass. With workload slices (slices.go) it is the next slice,
// a fresh one: it replaces none.
func (s *step) createWorkload(ctx context.Context) error {
	wl, err := s.newWorkload(ctx, s.slice.next, s.job.Spec.MinWorkerCount())
	if err != nil || wl == nil {
		return err
	}
	if err := s.r.Client.Create(ctx, wl); apierrors.IsAlreadyExists(err) {
		return nil // made by a reconcile whose status write was lost: it told of it then
	} else if err != nil {
		return fmt.Errorf("create Workload %s: %w", wl.GetName(), err)
	}
	s.eventNow(corev1.EventTypeNormal, "WorkloadCreated", fmt.Sprintf("created Kueue Workload %s for %d workers in LocalQueue %q",
		wl.GetName(), s.job.Spec.WorkerCount(), s.queueName()))
	return nil
}

// newWorkload renders slice number slice of the TrainJob's Workload (1, and the only one,
// without workload slices), asking for spec.workers and, through Kueue's partial
// admission, as few as least. It returns nil when the job failed (a pod template that
// does not apply, or pods the pod policy refuses: the template is the workers' pod).
func (s *step) newWorkload(ctx context.Context, slice, least int) (*unstructured.Unstructured, error) {
	a, err := workload.Render(s.job, s.podsAttempt(), s.r.Options.renderOptions())
	if err != nil {
		return nil, s.fail(v1.ReasonInvalidPodTemplate, err.Error())
	}
	if ok, err := s.checkPods(ctx, &a.Template.Spec); !ok || err != nil {
		return nil, err
	}
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.Template)
	if err != nil {
		return nil, fmt.Errorf("workload template: %w", err)
	}
	set := map[string]any{"name": podSetWorkers, "count": int64(s.job.Spec.WorkerCount()), "template": tmpl}
	if least < s.job.Spec.WorkerCount() {
		// Kueue's partial admission: it may admit as few as least workers when the quota
		// has no room for all.
		set["minCount"] = int64(least)
	}
	spec := map[string]any{"queueName": s.queueName(), "podSets": []any{set}}
	if pc := s.job.Spec.Kubernetes.PriorityClassName; pc != "" {
		var cls schedulingv1.PriorityClass
		if err := s.r.Reader.Get(ctx, client.ObjectKey{Name: pc}, &cls); err != nil {
			return nil, fmt.Errorf("get PriorityClass %s for the Workload: %w", pc, err)
		}
		spec["priorityClassRef"] = map[string]any{"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pc}
		spec["priority"] = int64(cls.Value)
	}
	wl := newWorkloadObject()
	wl.SetName(sliceName(s.job, slice))
	wl.SetNamespace(s.job.Namespace)
	wl.SetLabels(map[string]string{workload.LabelJob: s.job.Name, workload.LabelJobUID: string(s.job.UID),
		workload.LabelManagedBy: workload.ManagedBy})
	if s.slicing() {
		wl.SetAnnotations(map[string]string{annotationElasticJob: "true", annotationSlice: strconv.Itoa(slice)})
	}
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: v1.APIVersion, Kind: v1.Kind, Name: s.job.Name,
		UID: s.job.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}})
	wl.Object["spec"] = spec
	return wl, nil
}

// annotationSuspended marks a Workload the operator deactivated because its TrainJob was
// suspended, and so activates again when it resumes.
const annotationSuspended = "trainyard.dev/deactivated-by-suspend"

// wlActive reports the Workload's spec.active (default true).
func wlActive(wl *unstructured.Unstructured) bool {
	active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active")
	return !found || active
}

// setWorkloadActive sets the Workload's spec.active: false when the TrainJob is
// suspended (Kueue evicts it and frees its quota), true when it resumes.
func (s *step) setWorkloadActive(ctx context.Context, wl *unstructured.Unstructured, active bool) error {
	wl = wl.DeepCopy()
	if err := unstructured.SetNestedField(wl.Object, active, "spec", "active"); err != nil {
		return err
	}
	notes := wl.GetAnnotations()
	if active {
		delete(notes, annotationSuspended)
	} else {
		if notes == nil {
			notes = map[string]string{}
		}
		notes[annotationSuspended] = "true"
	}
	wl.SetAnnotations(notes)
	if err := s.r.Client.Update(ctx, wl); err != nil {
		return fmt.Errorf("set Workload %s active=%v: %w", wl.GetName(), active, err)
	}
	return nil
}

// suspendWorkload deactivates the Workload of a suspended TrainJob and, once its pods are
// gone, gives back the reservation Kueue's eviction leaves.
func (s *step) suspendWorkload(ctx context.Context) error {
	wl, err := s.getWorkload(ctx)
	if err != nil || wl == nil {
		return err
	}
	if err := s.dropPendingSlice(ctx); err != nil {
		return err
	}
	if wlActive(wl) {
		return s.setWorkloadActive(ctx, wl, false)
	}
	if !s.kids.empty() || !wlHasCondition(wl, wlQuotaReserved, metav1.ConditionTrue) {
		return nil
	}
	return s.updateWorkloadStatus(ctx, wl, func(wl *unstructured.Unstructured, conds *[]metav1.Condition) {
		unsetQuota(s, wl, conds, "Pending", "the TrainJob is suspended")
	})
}

// podsReady tells Kueue that every worker of the admitted gang runs (the Workload's
// PodsReady condition, as jobframework sets it), which Kueue's waitForPodsReady waits for
// before its timeout evicts the gang. Later attempts keep it: a restart keeps the admission.
func (s *step) podsReady(ctx context.Context) error {
	if s.workload == nil || wlHasCondition(s.workload, wlPodsReady, metav1.ConditionTrue) {
		return nil
	}
	return s.updateWorkloadStatus(ctx, s.workload, func(wl *unstructured.Unstructured, conds *[]metav1.Condition) {
		meta.SetStatusCondition(conds, s.wlCondition(wl, wlPodsReady, metav1.ConditionTrue, "PodsReady", "All pods reached readiness and the workload is running"))
	})
}

// finishWorkload marks the Workload of a finished TrainJob Finished, which frees its quota.
func (s *step) finishWorkload(ctx context.Context) error {
	wl, err := s.getWorkload(ctx)
	if err != nil || wl == nil || wlHasCondition(wl, wlFinished, metav1.ConditionTrue) {
		return err
	}
	if err := s.dropPendingSlice(ctx); err != nil {
		return err
	}
	reason := "Succeeded"
	if s.job.Status.Phase == v1.PhaseFailed {
		reason = "Failed"
	}
	return s.updateWorkloadStatus(ctx, wl, func(wl *unstructured.Unstructured, conds *[]metav1.Condition) {
		meta.SetStatusCondition(conds, s.wlCondition(wl, wlFinished, metav1.ConditionTrue, reason, truncate(s.job.Status.Reason)))
		unsetQuota(s, wl, conds, wlFinished, "Workload has finished")
	})
}

// unsetQuota clears the Workload's quota reservation and admission, as Kueue's
// UnsetQuotaReservationWithCondition does.
func unsetQuota(s *step, wl *unstructured.Unstructured, conds *[]metav1.Condition, reason, msg string) {
	meta.SetStatusCondition(conds, s.wlCondition(wl, wlQuotaReserved, metav1.ConditionFalse, reason, msg))
	if wlHasCondition(wl, wlAdmitted, metav1.ConditionTrue) {
		meta.SetStatusCondition(conds, s.wlCondition(wl, wlAdmitted, metav1.ConditionFalse, "NoReservation", "The workload has no reservation"))
	}
	unstructured.RemoveNestedField(wl.Object, "status", "admission")
	unstructured.RemoveNestedField(wl.Object, "status", "reclaimablePods") // a new admission counts anew
}

// updateWorkloadStatus changes the Workload's status with change and writes it.
func (s *step) updateWorkloadStatus(ctx context.Context, wl *unstructured.Unstructured, change func(*unstructured.Unstructured, *[]metav1.Condition)) error {
	wl = wl.DeepCopy()
	conds := wlConditions(wl)
	change(wl, &conds)
	raw := make([]any, 0, len(conds))
	for i := range conds {
		c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return err
		}
		raw = append(raw, c)
	}
	if err := unstructured.SetNestedSlice(wl.Object, raw, "status", "conditions"); err != nil {
		return err
	}
	if err := s.r.Client.Status().Update(ctx, wl); err != nil {
		return fmt.Errorf("update the status of Workload %s: %w", wl.GetName(), err)
	}
	return nil
}

// wlCondition returns a Workload condition as of now.
func (s *step) wlCondition(wl *unstructured.Unstructured, kind string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: kind, Status: status, Reason: reason, Message: truncate(msg),
		ObservedGeneration: wl.GetGeneration(), LastTransitionTime: metav1.NewTime(s.now)}
}

// truncate keeps a condition message within the API's 32 KiB.
func truncate(msg string) string {
	const limit = 32 * 1024
	if len(msg) > limit {
		return msg[:limit-3] + "..."
	}
	return msg
}

// wlConditions reads a Workload's conditions.
func wlConditions(wl *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

func wlCondition(wl *unstructured.Unstructured, kind string) *metav1.Condition {
	conds := wlConditions(wl)
	return meta.FindStatusCondition(conds, kind)
}

func wlHasCondition(wl *unstructured.Unstructured, kind string, status metav1.ConditionStatus) bool {
	c := wlCondition(wl, kind)
	return c != nil && c.Status == status
}

// wlAdmittedNow reports whether Kueue admits the Workload: quota reserved and admitted.
func wlAdmittedNow(wl *unstructured.Unstructured) bool {
	return wlHasCondition(wl, wlQuotaReserved, metav1.ConditionTrue) && wlHasCondition(wl, wlAdmitted, metav1.ConditionTrue)
}

// kueuePlacement is where Kueue's admission puts the workers: the node labels and
// tolerations of the ResourceFlavors assigned to the workers' PodSet (what Kueue's
// podset.FromAssignment gives the Jobs it admits). Nil without an admitted Workload.
func (s *step) kueuePlacement(ctx context.Context) (*workload.Placement, error) {
	if s.workload == nil {
		return nil, nil
	}
	assignments, _, _ := unstructured.NestedSlice(s.workload.Object, "status", "admission", "podSetAssignments")
	var flavors []string
	for _, a := range assignments {
		m, _ := a.(map[string]any)
		if name, _ := m["name"].(string); name != podSetWorkers {
			continue
		}
		byResource, _, _ := unstructured.NestedStringMap(m, "flavors")
		for _, f := range byResource {
			if !slices.Contains(flavors, f) {
				flavors = append(flavors, f)
			}
		}
	}
	slices.Sort(flavors)
	p := &workload.Placement{}
	for _, name := range flavors {
		rf := &unstructured.Unstructured{}
		rf.SetGroupVersionKind(flavorGVK)
		if err := s.r.Reader.Get(ctx, client.ObjectKey{Name: name}, rf); err != nil {
			return nil, fmt.Errorf("get ResourceFlavor %s: %w", name, err)
		}
		labels, _, _ := unstructured.NestedStringMap(rf.Object, "spec", "nodeLabels")
		for k, v := range labels {
			if p.NodeSelector == nil {
				p.NodeSelector = map[string]string{}
			}
			p.NodeSelector[k] = v
		}
		tols, _, _ := unstructured.NestedSlice(rf.Object, "spec", "tolerations")
		for _, t := range tols {
			m, _ := t.(map[string]any)
			var tol corev1.Toleration
			if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tol) == nil {
				p.Tolerations = append(p.Tolerations, tol)
			}
		}
	}
	return p, nil
}
