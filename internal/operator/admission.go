package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// The operator's pod policy (internal/podpolicy): before anything of an attempt is
// created (its NetworkPolicy, Service and Job, and the job's TensorBoard), the worker
// pod it would run is checked. A job the policy refuses fails with ReasonPodPolicy, its
// condition and Event naming the fields, and nothing is created; a job whose Secret does
// not exist yet waits for it.

// secretWait is how often a job that waits for a Secret or ServiceAccount looks again.
const secretWait = 5 * time.Second

// submitGrace is how long a Secret that `trainyard submit --kube` made may lack its
// owner: submit creates the TrainJob, then makes it own the Secret.
const submitGrace = time.Minute

// needsAdmission reports whether the next step may create an attempt's objects or the
// TensorBoard: the job is not over, and nothing of an attempt exists.
func (s *step) needsAdmission() bool {
	st := &s.job.Status
	return !st.Phase.Finished() && s.kids.empty() && !(s.job.Spec.Suspend && st.Phase == v1.PhaseSuspended)
}

// admit checks the job against the pod policy. It returns false when the job may not go
// on now: it failed, or it waits (and is looked at again).
func (s *step) admit(ctx context.Context) (bool, error) {
	level := s.r.Options.PodPolicy
	if level == "" {
		level = podpolicy.Default
	}
	if !s.needsAdmission() || level == podpolicy.Off {
		return true, nil
	}
	a, err := workload.Render(s.job, max(1, int(s.job.Status.Attempt)), s.r.Options.renderOptions())
	if err != nil {
		return false, s.fail(v1.ReasonInvalidPodTemplate, err.Error())
	}
	pod := &a.Template.Spec
	access, waits, err := s.r.access(ctx, s.job, podpolicy.Referenced(pod), s.now)
	if err != nil {
		return false, err
	}
	if vs := podpolicy.CheckTrainJob(s.job, pod, access); len(vs) > 0 {
		return false, s.fail(v1.ReasonPodPolicy, fmt.Sprintf("the operator's pod policy (%s) refuses the job's pods, so nothing was created: %v", level, vs))
	}
	if len(waits) == 0 {
		return true, nil
	}
	st := &s.job.Status
	if st.Phase == "" {
		st.Phase = v1.PhasePending
	}
	msg := "waiting before creating the workers: " + strings.Join(waits, "; ")
	st.Reason = msg
	if s.condition(v1.CondRunning, false, v1.ReasonWaitingForSecret, msg) {
		s.event(corev1.EventTypeNormal, v1.ReasonWaitingForSecret, msg)
	}
	s.requeue(secretWait)
	return false, nil
}

// access looks up the ServiceAccounts and Secrets the job's pods use, and returns those
// the job may use (labelled v1.LabelTrainJobAccess, or Secrets the TrainJob owns) and
// why it must wait: Secrets that do not exist yet are let through, to wait for, and so
// is a Secret that submit made and has not yet given the TrainJob.
func (r *Reconciler) access(ctx context.Context, job *v1.TrainJob, refs podpolicy.References, now time.Time) (*podpolicy.Access, []string, error) {
	acc := &podpolicy.Access{}
	var waits []string
	for _, name := range refs.ServiceAccounts {
		m, err := r.metadata(ctx, "ServiceAccount", job.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			// Refused: one made later would need the label anyway.
		case err != nil:
			return nil, nil, err
		case m.Labels[v1.LabelTrainJobAccess] == "true":
			acc.ServiceAccounts = append(acc.ServiceAccounts, name)
		}
	}
	for _, name := range refs.Secrets {
		if name == workload.GangSecretName(job.Name) {
			// The operator makes it, owned by the job, before the pods (gangSecret).
			acc.Secrets = append(acc.Secrets, name)
			continue
		}
		m, err := r.metadata(ctx, "Secret", job.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			waits = append(waits, fmt.Sprintf("Secret %q does not exist", name))
			acc.Secrets = append(acc.Secrets, name)
		case err != nil:
			return nil, nil, err
		case m.Labels[v1.LabelTrainJobAccess] == "true" || ownedBy(m, job):
			acc.Secrets = append(acc.Secrets, name)
		case m.Labels[workload.LabelManagedBy] == workload.ManagedBy && len(m.OwnerReferences) == 0 &&
			now.Sub(job.CreationTimestamp.Time) < submitGrace:
			waits = append(waits, fmt.Sprintf("Secret %q, made by trainyard submit, is not yet owned by the TrainJob", name))
			acc.Secrets = append(acc.Secrets, name)
		}
	}
	return acc, waits, nil
}

// metadata reads an object's metadata from the API server (not the cache: the operator
// watches no Secrets), for a policy check before an attempt is created.
func (r *Reconciler) metadata(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("read %s %s/%s for the pod policy: %w", kind, namespace, name, err)
	}
	return m, nil
}

// ownedBy reports whether job owns the object.
func ownedBy(m *metav1.PartialObjectMetadata, job *v1.TrainJob) bool {
	for _, o := range m.OwnerReferences {
		if o.UID == job.UID && o.Kind == v1.Kind {
			return true
		}
	}
	return false
}
