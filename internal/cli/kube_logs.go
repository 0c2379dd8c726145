package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/trainyard/trainyard/internal/kubecli"
)

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
