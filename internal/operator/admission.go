package operator

import (
	"context"
	"fmt"
	"slices"
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

// The operator's pod policy (internal/podpolicy) is checked before every pod the operator
// creates, on the TrainJob as the reconcile reads it: checkPods passes an attempt's pods, a
// lost worker's replacement, the room probes, and the pod templates the operator hands on
// (the TensorBoard's Deployment, a Kueue Workload's). So a spec edited after admission, or
// a ServiceAccount or Secret no longer open to TrainJobs, brings no pod the policy has not
// passed. A job the policy refuses fails with ReasonPodPolicy, its condition and Event
// naming the fields, and those pods are not created.
//
// Before anything of an attempt is created (its NetworkPolicy, Service and pods, and the
// job's TensorBoard), admit checks the worker pod it would run, and a job whose Secret
// does not exist yet waits for it. The CRD freezes the fields the policy reads
// (api/v1alpha1), so the API server refuses such an edit first.

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
	if !s.needsAdmission() || s.r.Options.podPolicy() == podpolicy.Off {
		return true, nil
	}
	a, err := workload.Render(s.job, max(1, int(s.job.Status.Attempt)), s.r.Options.renderOptions())
	if err != nil {
		return false, s.fail(v1.ReasonInvalidPodTemplate, err.Error())
	}
	vs, waits, err := s.policy(ctx, &a.Template.Spec)
	if err != nil {
		return false, err
	}
	if len(vs) > 0 {
		return false, s.refuse(vs)
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

// checkPods checks pods, which the step is about to create or hand on in a template,
// against the pod policy, as the TrainJob asks for them now. Every pod the operator
// creates goes through it first. It returns false when the policy refuses one of them:
// then the job failed (or, finished already, an Event says so) and the caller creates
// nothing. A Secret that does not exist is let through here: the pod waits for it.
func (s *step) checkPods(ctx context.Context, pods ...*corev1.PodSpec) (bool, error) {
	vs, _, err := s.policy(ctx, pods...)
	if err != nil {
		return false, err
	}
	if len(vs) > 0 {
		return false, s.refuse(vs)
	}
	return true, nil
}

// policy returns what the pod policy refuses in pods, each violation once, and the
// Secrets they would wait for.
func (s *step) policy(ctx context.Context, pods ...*corev1.PodSpec) (podpolicy.Violations, []string, error) {
	if s.r.Options.podPolicy() == podpolicy.Off {
		return nil, nil, nil
	}
	var refs podpolicy.References
	for _, p := range pods {
		r := podpolicy.Referenced(p)
		refs.ServiceAccounts = appendNew(refs.ServiceAccounts, r.ServiceAccounts...)
		refs.Secrets = appendNew(refs.Secrets, r.Secrets...)
	}
	access, waits, err := s.r.access(ctx, s.job, refs, s.now)
	if err != nil {
		return nil, nil, err
	}
	var out podpolicy.Violations
	seen := map[string]bool{}
	for _, p := range pods {
		for _, v := range podpolicy.CheckTrainJob(s.job, p, access) {
			if !seen[v.String()] {
				seen[v.String()] = true
				out = append(out, v)
			}
		}
	}
	return out, waits, nil
}

// refuse fails the job for the violations vs: ReasonPodPolicy, its condition and Event
// naming the fields. A job that finished already keeps its phase and gets the Event alone.
func (s *step) refuse(vs podpolicy.Violations) error {
	msg := fmt.Sprintf("the operator's pod policy (%s) refuses the job's pods, so none was created: %v", s.r.Options.podPolicy(), vs)
	if s.job.Status.Phase.Finished() {
		s.event(corev1.EventTypeWarning, v1.ReasonPodPolicy, msg)
		return nil
	}
	return s.fail(v1.ReasonPodPolicy, msg)
}

// appendNew appends those of items that list does not hold yet.
func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
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
