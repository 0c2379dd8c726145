package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/internal/kubecli"
)

// kubeLogOptions turns the flags of logs --kube into kubecli's options. Without -i,
// --rank or --all-ranks it is worker 0's pod, rank 0's, as Arena prints its chief's.
func kubeLogOptions(o logsOptions) (kubecli.LogOptions, error) {
	lo := kubecli.LogOptions{Follow: o.follow, Tail: o.tail, Rank: o.rank, Attempt: o.attempt, From: o.from,
		Instance: strings.TrimSpace(o.instance), Timestamps: o.timestamps}
	given := func(names ...string) error {
		return usageError(fmt.Errorf("%s: give one of them", strings.Join(names, " and ")))
	}
	switch {
	case o.allRanks && o.instance != "":
		return lo, given("--all-ranks", "-i")
	case o.allRanks && o.rank >= 0:
		return lo, given("--all-ranks", "--rank")
	case o.instance != "" && o.rank >= 0:
		return lo, usageError(errors.New("-i and --rank: give one of them (--rank R reads the pod of the worker that runs rank R)"))
	case o.since != "" && o.sinceTime != "":
		return lo, given("--since", "--since-time")
	case o.instance != "" && lo.Instance == "":
		return lo, usageError(errors.New("-i: give worker-I or a pod's name"))
	}
	if o.since != "" {
		d, err := time.ParseDuration(o.since)
		switch {
		case err != nil:
			return lo, usageError(fmt.Errorf("--since %s: not a duration: give a number and a unit, such as 30s, 10m or 2h", o.since))
		case d <= 0:
			return lo, usageError(fmt.Errorf("--since %s: give a while more than 0, such as 30s, 10m or 2h", o.since))
		}
		lo.Since = d
	}
	if o.sinceTime != "" {
		t, err := time.Parse(time.RFC3339, o.sinceTime)
		if err != nil {
			return lo, usageError(fmt.Errorf("--since-time %s: not an RFC 3339 time: give one such as 2026-11-22T13:00:00Z", o.sinceTime))
		}
		lo.SinceTime = t
	}
	if o.from != "" && (o.since != "" || o.sinceTime != "" || o.timestamps) {
		return lo, usageError(errors.New("--from reads the rank logs, which have no timestamps: leave out --since, --since-time and --timestamps"))
	}
	if lo.Instance == "" && !o.allRanks && o.rank < 0 {
		lo.Instance = "worker-0"
	}
	return lo, nil
}

// kubeLogs prints a TrainJob's logs from its worker pods, or from its run folder when
// the pods are gone; with -f it follows them until the job ends.
func kubeLogs(ctx context.Context, g *globals, k *kubeOptions, name string, opts kubecli.LogOptions) error {
	if opts.Attempt < 0 {
		return usageError(errors.New("--attempt must be 1 or more"))
	}
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	if opts.Follow {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	err = c.Logs(ctx, name, opts, g.io.Out, g.io.Err)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("stopped following TrainJob %s; the job goes on", name)}
	}
	if err != nil {
		return kubeError(err)
	}
	return nil
}
