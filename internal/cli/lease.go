package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gpulease"
)

// leaseRetry is how long leaseGPUs waits before asking a server that did not answer again.
const leaseRetry = 2 * time.Second

// leaseGPUs leases the job's GPUs from the trainyard server whose job this process runs
// in (a Ray Train driver's fit() starting its gang), so that the server's scheduler
// accounts for them; outside a server's job it does nothing. It waits while the server
// says the GPUs are taken, printing why, and asks again while the server does not answer
// (it may be restarting). The GPUs granted become this process's CUDA_VISIBLE_DEVICES,
// and its children do not lease again. release gives them back.
func leaseGPUs(ctx context.Context, g *globals, job *v1.TrainJob) (release func(), err error) {
	socket, req, ok := gpulease.FromEnv(int(job.Spec.WorkerCount()), int(job.Spec.Resources.GPU))
	if !ok {
		return func() {}, nil
	}
	for _, key := range []string{gpulease.EnvSocket, gpulease.EnvJob, gpulease.EnvSecret} {
		_ = os.Unsetenv(key)
	}
	fmt.Fprintf(g.io.Err, "trainyard: asking the server for %d GPUs (%d workers × %d)\n",
		req.Workers*req.GPUsPerWorker, req.Workers, req.GPUsPerWorker)
	said := ""
	say := func(why string) {
		if why != said {
			said = why
			fmt.Fprintf(g.io.Err, "trainyard: waiting for GPUs: %s\n", why)
		}
	}
	for {
		lease, err := gpulease.Acquire(ctx, socket, req, say)
		var refused *gpulease.RefusedError
		switch {
		case err == nil:
			visible := gpulease.Visible(lease.GPUs)
			if err := os.Setenv("CUDA_VISIBLE_DEVICES", visible); err != nil {
				lease.Release()
				return nil, err
			}
			fmt.Fprintf(g.io.Err, "trainyard: the server granted GPUs %s\n", visible)
			return lease.Release, nil
		case errors.As(err, &refused), ctx.Err() != nil:
			return nil, failed(err)
		}
		say(fmt.Sprintf("the server does not answer (%v); asking again", err))
		select {
		case <-ctx.Done():
			return nil, failed(ctx.Err())
		case <-time.After(leaseRetry):
		}
	}
}
