package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/python"
)

// runStandby is `trainyard run --standby -f SPEC`, which a job server started with
// --prestart runs after it started the job of SPEC: it starts a spare Python for each
// rank of a job shaped like that one and waits for the server's next job on stdin (see
// launcher/pool.go). Given one (a launcher.StandbyRequest), it becomes that job's
// supervisor by exec, handing its spares over; at the end of stdin (the server stopped
// or dropped it), it kills them and exits.
func runStandby(ctx context.Context, g *globals, flags *jobspec.Flags, opts runOptions, command []string) error {
	l, err := standbyLauncher(ctx, g, flags, opts, command)
	if err != nil {
		return &exitError{code: ExitFailed, err: fmt.Errorf("standby: %w", err)}
	}
	n, err := l.Standby(ctx)
	if err != nil {
		return &exitError{code: ExitFailed, err: fmt.Errorf("standby: %w", err)}
	}
	g.logger().Info("standby: spares started", "spares", n)
	var req launcher.StandbyRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		l.DropSpares()
		if errors.Is(err, io.EOF) {
			return nil // the server has no job for us
		}
		return &exitError{code: ExitFailed, err: fmt.Errorf("standby: read the job: %w", err)}
	}
	return becomeSupervisor(g, l, req)
}

// standbyLauncher is the launcher of a job shaped like the spec's, as `trainyard run -f`
// would make it, but with no folder, lease or clone: only what its ranks' start needs.
func standbyLauncher(ctx context.Context, g *globals, flags *jobspec.Flags, opts runOptions, command []string) (*launcher.Launcher, error) {
	job, err := flags.Resolve(command, jobspec.Env{})
	if err != nil {
		return nil, err
	}
	if job.Spec.Source != nil && job.Spec.Source.Git != nil {
		return nil, errors.New("a job with code from git is not kept warm")
	}
	if _, err := os.Stat(job.Spec.WorkingDir); err != nil {
		// The last job's folder is gone (a temporary one): the next job's is elsewhere,
		// and the spares get it when they run a rank. Whether its Python has ray is asked
		// here instead.
		job.Spec.WorkingDir = ""
	}
	if opts.maxWorkers, err = startWith(job, opts.startWorkers); err != nil {
		return nil, err
	}
	var inv device.Inventory
	if job.Spec.Resources.GPU > 0 {
		if inv, err = discoverGPUs(ctx); err != nil {
			return nil, err
		}
	}
	place, err := launcher.PlaceLocal(job, inv)
	if err != nil {
		return nil, err
	}
	helper, _, err := python.Install(python.Options{Logger: g.logger()})
	if err != nil {
		return nil, fmt.Errorf("install the Python helper: %w", err)
	}
	return &launcher.Launcher{Job: job, Placement: place, Logger: g.logger(), ExtraEnv: driverEnv(job, opts, helper),
		RayCompat: python.CompatDir(helper), MaxWorkers: opts.maxWorkers}, nil
}

// becomeSupervisor execs the request's command with stdin on /dev/null, stdout and stderr
// appended to its log and the spares handed over. What cannot be done is logged and
// skipped (without the spares the job starts afresh); only a failed exec returns.
func becomeSupervisor(g *globals, l *launcher.Launcher, req launcher.StandbyRequest) error {
	log := g.logger()
	if null, err := os.Open(os.DevNull); err == nil {
		_ = unix.Dup2(int(null.Fd()), 0)
	}
	if out, err := os.OpenFile(req.Log, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0); err != nil {
		log.Warn("standby: the job's output stays in the standby's log", "err", err)
	} else {
		_ = unix.Dup2(int(out.Fd()), 1)
		_ = unix.Dup2(int(out.Fd()), 2)
	}
	if err := os.Chdir(req.Dir); err != nil {
		log.Warn("standby: the job runs in the standby's folder", "err", err)
	}
	env := req.Env
	if v, err := l.HandOver(); err != nil {
		log.Warn("standby: the job starts without spares", "err", err)
		l.DropSpares()
	} else {
		env = append(env, v)
	}
	err := syscall.Exec(req.Path, req.Args, env)
	l.DropSpares()
	return &exitError{code: ExitFailed, err: fmt.Errorf("standby: become the job's supervisor: %w", err)}
}
