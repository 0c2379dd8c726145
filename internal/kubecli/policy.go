package kubecli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// policyLevel is the pod policy submit checks a job against: --pod-policy, else the
// operator's default.
func (f *JobFlags) policyLevel() (podpolicy.Level, error) {
	if f.PodPolicy == "" {
		return podpolicy.Default, nil
	}
	level, err := podpolicy.ParseLevel(f.PodPolicy)
	if err != nil {
		return "", fmt.Errorf("--pod-policy: %w", err)
	}
	return level, nil
}

// checkPolicy refuses, before anything is created, a job whose first attempt's pods the
// operator's pod policy would refuse (internal/podpolicy): the same check, on the same
// rendering. access is what submit could learn of the namespace's ServiceAccounts and
// Secrets; nil checks neither (--dry-run=client asks no cluster).
func checkPolicy(job *v1.TrainJob, pod *corev1.PodSpec, level podpolicy.Level, access *podpolicy.Access) error {
	if level == podpolicy.Off {
		return nil
	}
	if vs := podpolicy.CheckTrainJob(job, pod, access); len(vs) > 0 {
		return inputError("the operator's pod policy (%s) refuses the job's pods: %v; nothing was created "+
			"(on a cluster whose administrator turned the policy off, submit with --pod-policy=off)", level, vs)
	}
	return nil
}

// CheckAccess refuses a job whose pods would use a ServiceAccount or a Secret of the
// namespace that the operator's pod policy does not let TrainJobs use (one not labelled
// v1alpha1.LabelTrainJobAccess=true), reading their labels: what BuildJob could not check
// without a cluster. One the user may not read is left to the operator; one that does
// not exist is a warning (the operator waits for it). The Secret that submit makes
// (SecretPlaceholder) is the job's own.
func (c *Cluster) CheckAccess(ctx context.Context, job *v1.TrainJob, kf *JobFlags) (warnings []string, err error) {
	level, err := kf.policyLevel()
	if err != nil || level == podpolicy.Off {
		return nil, err
	}
	ns := job.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	named, a, err := RenderFirstAttempt(job, ns, "trainyard")
	if err != nil {
		return nil, err
	}
	pod := &a.Template.Spec
	refs := podpolicy.Referenced(pod)
	access := &podpolicy.Access{Secrets: []string{SecretPlaceholder}}
	core := c.Core.CoreV1()
	for _, name := range refs.ServiceAccounts {
		sa, err := core.ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		allowed, warning, err := accessible(err, "service account", name, ns, func() map[string]string { return sa.Labels })
		if err != nil {
			return nil, c.explain(err)
		}
		if allowed {
			access.ServiceAccounts = append(access.ServiceAccounts, name)
		}
		warnings = append(warnings, warning...)
	}
	for _, name := range refs.Secrets {
		if name == SecretPlaceholder || name == workload.GangSecretName(named.Name) {
			continue // the operator makes the job's gang Secret
		}
		s, err := core.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		allowed, warning, err := accessible(err, "Secret", name, ns, func() map[string]string { return s.Labels })
		if err != nil {
			return nil, c.explain(err)
		}
		if allowed {
			access.Secrets = append(access.Secrets, name)
		}
		warnings = append(warnings, warning...)
	}
	return warnings, checkPolicy(named, pod, level, access)
}

// accessible says whether an object read with err may be used by TrainJobs: it is
// labelled so, or cannot be read (the operator decides), or does not exist yet (with a
// warning).
func accessible(err error, kind, name, ns string, labels func() map[string]string) (bool, []string, error) {
	switch {
	case apierrors.IsForbidden(err):
		return true, nil, nil
	case apierrors.IsNotFound(err):
		return true, []string{fmt.Sprintf("%s %q does not exist in namespace %s: the operator waits for it before starting the workers",
			kind, name, ns)}, nil
	case err != nil:
		return false, nil, err
	}
	return labels()[v1.LabelTrainJobAccess] == "true", nil, nil
}
