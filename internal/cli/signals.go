package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/internal/preempt"
)

// stopSignals is how signals reach a command that runs a gang: SIGINT, SIGTERM and SIGHUP
// (a closed terminal or ssh session) ask it to stop, a second one to stop at once.
type stopSignals struct {
	// ctx is cancelled at the first signal: for the work before the gang starts.
	ctx context.Context
	// preempt receives the first signal's name, for the launcher (Launcher.Preempt).
	preempt <-chan string
	// force is closed at the second signal (Launcher.ForceKill).
	force <-chan struct{}
}

// signalNames name the signals as a run's reason gives them.
var signalNames = map[os.Signal]string{
	os.Interrupt:    "SIGINT",
	syscall.SIGTERM: "SIGTERM",
	syscall.SIGHUP:  "SIGHUP",
}

// handleSignals starts following the stop signals. It also takes SIGPIPE, so that a
// closed standard output (trainyard run ... | head) makes writes to it fail, which the
// console ignores, instead of killing the launcher and leaving its gang's record behind:
// the run goes on, into its log files.
func handleSignals(parent context.Context) stopSignals {
	ctx, cancel := context.WithCancel(parent)
	reason := make(chan string, 1)
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	outer := watchNotice(ctx, os.Getenv(preempt.EnvFile))
	reasonFile, _ := os.LookupEnv(preempt.EnvReason)
	_ = os.Unsetenv(preempt.EnvReason) // the job's server's, not its processes'
	go func() {
		var why string
		select {
		case first := <-sigs:
			why = signalNames[first]
			if first == syscall.SIGTERM && reasonFile != "" {
				if r := preempt.ReadReason(reasonFile); r != "" {
					why = r // a job server says why it stops this job
				}
			}
		case why = <-outer:
		}
		reason <- why
		cancel()
		<-sigs
		close(force)
		signal.Stop(sigs)
	}()
	return stopSignals{ctx: ctx, preempt: reason, force: force}
}

// noticePoll is how often a launcher started inside another's job (a Ray Train driver's
// gang) looks for the outer launcher's preemption notice.
const noticePoll = 200 * time.Millisecond

// watchNotice sends the reason of the preemption notice at path once it is posted: the
// notice of the launcher whose job started this one (a Ray Train driver's fit()), which
// this launcher passes on to its own ranks. Nothing is sent when path is "".
func watchNotice(ctx context.Context, path string) <-chan string {
	out := make(chan string, 1)
	if path == "" {
		return out
	}
	preempt.Listen(path)
	go poll(ctx, noticePoll, func() bool {
		c, ok, _ := preempt.Read(path)
		if ok {
			out <- c.Reason
		}
		return ok
	})
	return out
}

// poll calls check every period until it returns true or ctx ends.
func poll(ctx context.Context, every time.Duration, check func() bool) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if check() {
			return
		}
	}
}
