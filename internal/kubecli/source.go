package kubecli

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/workload"
)

// GitCredentials are the credentials of a job's git source that submit moves out of the
// TrainJob into a Secret.
type GitCredentials struct{ Username, Password string }

// SecretPlaceholder names the credentials Secret in a --dry-run=client rendering.
const SecretPlaceholder = "<git-credentials-secret>"

// TakeCredentials removes Arena's GIT_SYNC_USERNAME and GIT_SYNC_PASSWORD from the job's
// env (they would be stored in the TrainJob in clear) and returns them, or those of env
// (this process's), to read the remote with and to store in a Secret when the job names
// none. It returns nil when the job has no git source or there are no credentials.
func TakeCredentials(job *v1.TrainJob, env []string) *GitCredentials {
	src, ok := jobspec.GitSource(&job.Spec)
	if !ok {
		return nil
	}
	var jobEnv []string
	job.Spec.Env = slices.DeleteFunc(job.Spec.Env, func(e v1.EnvVar) bool {
		if e.Name == gitsource.EnvUsername || e.Name == gitsource.EnvPassword {
			jobEnv = append(jobEnv, e.Name+"="+e.Value)
			return true
		}
		return false
	})
	if len(job.Spec.Env) == 0 {
		job.Spec.Env = nil
	}
	src = src.FromEnv(env).FromEnv(jobEnv)
	if src.Username == "" && src.Password == "" {
		return nil
	}
	return &GitCredentials{Username: src.Username, Password: src.Password}
}

// PinSource resolves the job's git branch to the commit every worker and every restart
// checks out (spec.source.git.revision), reading the remote with creds, so that an unknown
// branch, refused credentials or a bad URL fail before anything is created.
func PinSource(ctx context.Context, job *v1.TrainJob, creds *GitCredentials) error {
	src, ok := jobspec.GitSource(&job.Spec)
	if !ok || src.Revision != "" {
		return nil
	}
	if creds != nil {
		src.Username, src.Password = creds.Username, creds.Password
	}
	commit, err := gitsource.Resolve(ctx, src)
	if err != nil {
		return &InputError{Err: fmt.Errorf("--sync-source: %w; nothing was created", err)}
	}
	job.Spec.Source.Git.Revision = commit
	return nil
}

// CreateGitSecret stores creds in a new Secret of namespace, named after the job, for
// the workers' init containers, and returns its name. With dryRun the API server only
// checks it.
func (c *Cluster) CreateGitSecret(ctx context.Context, namespace string, creds *GitCredentials, dryRun bool) (string, error) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "trainyard-git-", Namespace: namespace,
			Labels: map[string]string{workload.LabelManagedBy: workload.ManagedBy}},
		Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{workload.SecretUsernameKey: creds.Username,
			workload.SecretPasswordKey: creds.Password},
	}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := c.Core.CoreV1().Secrets(namespace).Create(ctx, s, opts)
	if err != nil {
		return "", fmt.Errorf("store the git credentials in a Secret: %w", c.explain(err))
	}
	return out.Name, nil
}

// OwnGitSecret makes the TrainJob own its credentials Secret, so that deleting the job
// deletes it; a job that was not created takes its Secret with it.
func (c *Cluster) OwnGitSecret(ctx context.Context, secret string, job *v1.TrainJob, created bool) error {
	secrets := c.Core.CoreV1().Secrets(job.Namespace)
	if !created {
		if err := secrets.Delete(ctx, secret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the git credentials Secret %s of a job that was not created: %w", secret, err)
		}
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q}]}}`,
		v1.APIVersion, v1.Kind, job.Name, job.UID)
	if _, err := secrets.Patch(ctx, secret, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("make TrainJob %s own its git credentials Secret %s: %w", job.Name, secret, c.explain(err))
	}
	return nil
}
