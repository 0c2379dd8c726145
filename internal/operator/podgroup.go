package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// Where the cluster serves the scheduler's gang scheduling (Kubernetes 1.35+ with the
// GenericWorkload feature gate and scheduling.k8s.io/v1beta1 served: the Workload and
// PodGroup API of KEP-4671), each attempt made for a job in no Kueue queue gets a
// PodGroup of the attempt's name, with the gang policy's minCount the workers the gang
// needs to start (an elastic gang's minimum), and its pods join it
// (spec.schedulingGroup): the scheduler's GangScheduling plugin binds none of them until
// it can bind that many. Pods made later in the attempt (a lost worker's replacement, a
// worker readmitted in place) join no group: the gang runs already. The PodGroup is owned
// by the TrainJob and deleted with its attempt.

// servesPodGroups reports whether the API server serves scheduling.k8s.io/v1beta1
// PodGroups.
func servesPodGroups(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("operator: discovery: %w", err)
	}
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("operator: look for PodGroups (%s): %w", gv, err)
	}
	for _, res := range list.APIResources {
		if res.Name == "podgroups" {
			return true, nil
		}
	}
	return false, nil
}

// podGroup makes the PodGroup of attempt a, whose pods then join it, when the job's gang
// is placed by the scheduler's gang scheduling.
func (s *step) podGroup(ctx context.Context, a *workload.Attempt) error {
	if !s.r.PodGroups || s.queueName() != "" {
		return nil
	}
	name := a.Service.Name
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Service.Namespace,
			Labels: a.Service.Labels, OwnerReferences: a.Service.OwnerReferences},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(min(s.job.Spec.MinWorkerCount(), s.gangSize()))},
		}},
	}
	if err := s.r.Client.Create(ctx, pg); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PodGroup %s: %w", name, err)
	}
	a.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
	return nil
}

// deletePodGroups deletes the PodGroup of attempt n of job, if any, with its pods.
func (r *Reconciler) deletePodGroups(ctx context.Context, job *v1.TrainJob, labels client.MatchingLabels, n int) error {
	if !r.PodGroups {
		return nil
	}
	err := r.Client.DeleteAllOf(ctx, &schedulingv1beta1.PodGroup{}, client.InNamespace(job.Namespace), labels)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the PodGroup of attempt %d of TrainJob %s: %w", n, job.Name, err)
	}
	return nil
}
