package kubecli

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/pause"
)

// suspendPatch sets spec.suspend; resumePatch clears it.
const (
	suspendPatch = `{"spec":{"suspend":true}}`
	resumePatch  = `{"spec":{"suspend":false}}`
)

// Suspend sets spec.suspend on the TrainJob name: the operator stops its running attempt
// (SIGTERM to every worker, then SIGKILL after the grace period) and starts none until it
// is cleared, when a new attempt resumes from the latest checkpoint. It returns the job,
// and whether it was suspended already. A job that has ended cannot be suspended.
func (c *Cluster) Suspend(ctx context.Context, name string) (job *v1.TrainJob, already bool, err error) {
	job, err = c.GetJob(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if job.Status.Phase.Finished() {
		return nil, false, fmt.Errorf("TrainJob %s has already %s: there is nothing to stop", name, strings.ToLower(string(job.Status.Phase)))
	}
	if job.Spec.Suspend {
		return job, true, nil
	}
	job, err = c.Jobs.MergePatch(ctx, c.Namespace, name, []byte(suspendPatch))
	if err != nil {
		return nil, false, c.jobError(c.Namespace, name, err)
	}
	return job, false, nil
}

// ResumeCommand is the kubectl command that resumes a suspended job.
func (c *Cluster) ResumeCommand(name string) string {
	return fmt.Sprintf("kubectl patch trainjob %s -n %s --type=merge -p '%s'", name, c.Namespace, resumePatch)
}

// Delete deletes the TrainJob name. Its attempts' Jobs, Services and pods are its
// dependents: by default the garbage collector deletes them after the TrainJob is gone;
// with wait they are deleted first (foreground deletion) and Delete returns once the
// TrainJob is gone, or timeout has passed. The run folder on the storage volume stays.
func (c *Cluster) Delete(ctx context.Context, name string, wait bool, timeout time.Duration) error {
	propagation := metav1.DeletePropagationBackground
	if wait {
		propagation = metav1.DeletePropagationForeground
	}
	if err := c.Jobs.Delete(ctx, c.Namespace, name, propagation); err != nil {
		return c.jobError(c.Namespace, name, err)
	}
	if !wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := c.Jobs.Get(ctx, c.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("TrainJob %s is still being deleted after %s: its pods have not all ended yet ('trainyard get --kube %s' shows them)",
				name, timeout, name)
		case err != nil:
			return c.explain(err)
		}
		if err := pause.For(ctx, pollInterval); err != nil && ctx.Err() == nil {
			return err
		}
	}
}
