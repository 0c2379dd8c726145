package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/workload"
)

// tensorBoard creates the job's TensorBoard Deployment and Service, once, when it asks for
// one: from the job's creation until ttlSecondsAfterFinished has passed (users look at the
// curves after training). A TensorBoard that cannot be rendered is a warning, not a failure
// of the training; one whose pod the pod policy refuses fails the job, as its workers would.
func (s *step) tensorBoard(ctx context.Context) error {
	k := s.job.Spec.Kubernetes
	if k == nil || k.TensorBoard == nil || s.ttlPassed() {
		return nil
	}
	if _, done := s.r.tensorboards.Load(s.job.UID); done {
		return nil
	}
	tb, err := workload.RenderTensorBoard(s.job)
	if err != nil {
		s.event(corev1.EventTypeWarning, "TensorBoardNotCreated", err.Error())
		s.r.tensorboards.Store(s.job.UID, false)
		return nil
	}
	if ok, err := s.checkPods(ctx, &tb.Deployment.Spec.Template.Spec); !ok || err != nil {
		if err == nil {
			s.r.tensorboards.Store(s.job.UID, false) // the job failed, or had finished: not asked again
		}
		return err
	}
	np := workload.RenderTensorBoardNetworkPolicy(s.job, s.r.network())
	for _, obj := range []client.Object{np, tb.Service, tb.Deployment} {
		if err := s.r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create TensorBoard %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	s.r.tensorboards.Store(s.job.UID, true)
	s.event(corev1.EventTypeNormal, "TensorBoardCreated", fmt.Sprintf("TensorBoard reads %s: %s",
		workload.TensorBoardLogDir(s.job), workload.TensorBoardAccess(s.job.Namespace, s.job.Name)))
	return nil
}

// removeTensorBoard deletes the job's TensorBoard once ttlSecondsAfterFinished has passed
// (deleting the TrainJob deletes it too: the TrainJob owns it).
func (s *step) removeTensorBoard(ctx context.Context) error {
	k := s.job.Spec.Kubernetes
	if k == nil || k.TensorBoard == nil {
		return nil
	}
	if created, seen := s.r.tensorboards.Load(s.job.UID); seen && !created.(bool) {
		return nil
	}
	tb, err := workload.RenderTensorBoard(s.job)
	if err != nil || tb == nil {
		return nil // never created
	}
	np := workload.RenderTensorBoardNetworkPolicy(s.job, s.r.network())
	for _, obj := range []client.Object{tb.Deployment, tb.Service, np} {
		if err := s.r.Client.Delete(ctx, obj, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete TensorBoard %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	s.r.tensorboards.Store(s.job.UID, false)
	return nil
}

// ttlPassed reports whether a finished job's ttlSecondsAfterFinished has passed.
func (s *step) ttlPassed() bool {
	t, done := s.job.Spec.TTLSecondsAfterFinished, s.job.Status.CompletionTime
	return s.job.Status.Phase.Finished() && t != nil && done != nil && !s.now.Before(done.Add(time.Duration(*t)*time.Second))
}
