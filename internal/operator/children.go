package operator

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// uidIndex is the cache index of Services and pods by the TrainJob UID label, so
// that finding a job's children does not scan every object of its namespace.
const uidIndex = "trainyard.dev/job-uid"

// indexChildren adds uidIndex to the cache of each kind listChildren reads.
func indexChildren(ctx context.Context, indexer client.FieldIndexer) error {
	byUID := func(obj client.Object) []string {
		if uid := obj.GetLabels()[workload.LabelJobUID]; uid != "" {
			return []string{uid}
		}
		return nil
	}
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.Pod{}} {
		if err := indexer.IndexField(ctx, obj, uidIndex, byUID); err != nil {
			return fmt.Errorf("operator: index %T by TrainJob: %w", obj, err)
		}
	}
	return nil
}

// listChildren lists the Services and pods of every attempt of job.
func (r *Reconciler) listChildren(ctx context.Context, job *v1.TrainJob) (children, error) {
	opts := []client.ListOption{client.InNamespace(job.Namespace), client.MatchingFields{uidIndex: string(job.UID)}}
	var (
		c    children
		svcs corev1.ServiceList
		pods corev1.PodList
	)
	for _, l := range []client.ObjectList{&svcs, &pods} {
		if err := r.Client.List(ctx, l, opts...); err != nil {
			return c, fmt.Errorf("list the objects of TrainJob %s: %w", job.Name, err)
		}
	}
	c.services = svcs.Items
	for _, p := range pods.Items {
		if p.Labels[LabelRoomProbe] != "" {
			c.probes = append(c.probes, p)
		} else {
			c.pods = append(c.pods, p)
		}
	}
	return c, nil
}

// teardown deletes what is left of attempt n: its Service and its pods. Pods are deleted
// directly, not left to the garbage collector, so that a gang stops in seconds and the
// next attempt need not wait for a collector's pass. Objects already being deleted are
// not asked again, so polling a teardown costs the API server nothing.
func (r *Reconciler) teardown(ctx context.Context, job *v1.TrainJob, kids children, n int) error {
	for i := range kids.services {
		svc := &kids.services[i]
		if attemptLabel(svc.Labels) != n || svc.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete attempt %d of TrainJob %s: %w", n, job.Name, err)
		}
	}
	live := slices.ContainsFunc(kids.podsOf(n), func(p corev1.Pod) bool { return p.DeletionTimestamp == nil })
	if !live {
		return nil
	}
	labels := client.MatchingLabels{workload.LabelJobUID: string(job.UID), workload.LabelAttempt: strconv.Itoa(n)}
	if err := r.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(job.Namespace), labels); err != nil {
		return fmt.Errorf("delete the pods of attempt %d of TrainJob %s: %w", n, job.Name, err)
	}
	return r.deletePodGroups(ctx, job, labels, n)
}

// stopAttempt stops what still runs of a job that failed for good: its running pods are
// deleted (a finished job's pods are never made again), while pods that ended stay with
// their logs.
func (r *Reconciler) stopAttempt(ctx context.Context, kids children) error {
	for i := range kids.pods {
		p := &kids.pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s: %w", p.Name, err)
		}
	}
	for i := range kids.services {
		if err := r.Client.Delete(ctx, &kids.services[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Service %s: %w", kids.services[i].Name, err)
		}
	}
	return nil
}

// configProblem finds what keeps a job's pods from starting that the API can tell before
// the scheduler says so: a PVC that does not exist, more GPUs per worker than any node has.
func (r *Reconciler) configProblem(ctx context.Context, job *v1.TrainJob) *problem {
	if k := job.Spec.Kubernetes; k != nil {
		for i, v := range k.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			var pvc corev1.PersistentVolumeClaim
			err := r.Reader.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, &pvc)
			if apierrors.IsNotFound(err) {
				return &problem{reason: "MissingVolume", message: fmt.Sprintf("spec.kubernetes.volumes[%d] (%s): persistentvolumeclaim %q does not exist in namespace %s",
					i, v.Name, v.PersistentVolumeClaim.ClaimName, job.Namespace)}
			}
		}
	}
	if gpus := job.Spec.Resources.GPU; gpus > 0 {
		return r.gpuProblem(ctx, gpus)
	}
	return nil
}

// gpuProblem says when no node could ever hold a worker's GPUs.
func (r *Reconciler) gpuProblem(ctx context.Context, gpus int32) *problem {
	var nodes corev1.NodeList
	// From the cache (a Node informer, slimmed to what is read here): listing nodes from
	// the API server for every starting job would load it with thousands of jobs.
	if err := r.Client.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		return nil // no nodes to judge by (or no permission): the scheduler will say
	}
	most, where := int64(0), ""
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[workload.GPUResource]
		if v := q.Value(); v > most {
			most, where = v, n.Name
		}
	}
	switch {
	case most == 0:
		return &problem{reason: "InsufficientGPU", message: fmt.Sprintf("each worker asks for %d nvidia.com/gpu but none of the %d nodes has any allocatable (is NVIDIA's device plugin running?)",
			gpus, len(nodes.Items))}
	case most < int64(gpus):
		return &problem{reason: "InsufficientGPU", message: fmt.Sprintf("each worker asks for %d nvidia.com/gpu but the most any of the %d nodes has is %d (%s)",
			gpus, len(nodes.Items), most, where)}
	}
	return nil
}

// condition sets a condition and reports whether it changed (status or reason).
func (s *step) condition(kind string, status bool, reason, msg string) bool {
	cs := metav1.ConditionFalse
	if status {
		cs = metav1.ConditionTrue
	}
	prev := meta.FindStatusCondition(s.job.Status.Conditions, kind)
	changed := prev == nil || prev.Status != cs || prev.Reason != reason
	meta.SetStatusCondition(&s.job.Status.Conditions, metav1.Condition{Type: kind, Status: cs, Reason: reason,
		Message: msg, ObservedGeneration: s.job.Generation, LastTransitionTime: metav1.NewTime(s.now)})
	return changed
}

func (s *step) time() *metav1.Time {
	t := metav1.NewTime(s.now)
	return &t
}

func ptr[T any](v T) *T { return &v }
