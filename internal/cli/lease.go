package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/ganglease"
)

// leaseRetry is how long leaseGang waits before asking a server that did not answer again.
const leaseRetry = 2 * time.Second

// gangRequest is what a job's gang asks its server for: its workers' GPUs, and their CPU
// and memory as the job names them. A gang that names no CPU asks for 1 core per process,
// which is what Ray Train gives each worker by default.
func gangRequest(job *v1.TrainJob) ganglease.Request {
	s, r := &job.Spec, job.Spec.Resources
	req := ganglease.Request{Workers: int(s.WorkerCount()), GPUsPerWorker: int(r.GPU),
		MilliCPUPerWorker: 1000 * int64(s.ProcCount())}
	if r.CPU != nil {
		req.MilliCPUPerWorker = r.CPU.MilliValue()
	}
	if r.Memory != nil {
		req.MemoryBytesPerWorker = r.Memory.Value()
	}
	return req
}

// leaseGang leases the job's gang from the trainyard server whose job this process runs
// in (a Ray Train driver's fit() starting its gang), so that the server's scheduler
// accounts for its GPUs, CPU and memory; outside a server's job it does nothing. It waits
// while the server says the resources are taken, printing why, and asks again while the
// server does not answer (it may be restarting). The GPUs granted become this process's
// CUDA_VISIBLE_DEVICES, and its children do not lease again. release gives them back.
func leaseGang(ctx context.Context, g *globals, job *v1.TrainJob) (release func(), err error) {
	socket, req, ok := ganglease.FromEnv(gangRequest(job))
	if !ok {
		return func() {}, nil
	}
	for _, key := range []string{ganglease.EnvSocket, ganglease.EnvJob, ganglease.EnvSecret} {
		_ = os.Unsetenv(key)
	}
	fmt.Fprintf(g.io.Err, "trainyard: asking the server for the gang's resources: %s\n", req)
	said := ""
	say := func(why string) {
		if why != said {
			said = why
			fmt.Fprintf(g.io.Err, "trainyard: the gang waits: %s\n", why)
		}
	}
	for {
		lease, err := ganglease.Acquire(ctx, socket, req, say)
		var refused *ganglease.RefusedError
		switch {
		case err == nil:
			return granted(g, req, lease)
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

// granted makes the lease's GPUs this process's CUDA_VISIBLE_DEVICES (a gang with GPUs)
// and says what the server granted.
func granted(g *globals, req ganglease.Request, lease *ganglease.Lease) (release func(), err error) {
	if req.GPUsPerWorker == 0 {
		fmt.Fprintln(g.io.Err, "trainyard: the server granted the gang its CPUs")
		return lease.Release, nil
	}
	visible := ganglease.Visible(lease.GPUs)
	if err := os.Setenv("CUDA_VISIBLE_DEVICES", visible); err != nil {
		lease.Release()
		return nil, err
	}
	fmt.Fprintf(g.io.Err, "trainyard: the server granted GPUs %s\n", visible)
	return lease.Release, nil
}
