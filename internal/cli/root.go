package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// Version is the build's version, set at link time with -X.
var Version = "dev"

// Exit codes of the trainyard command.
const (
	ExitOK          = 0
	ExitFailed      = 1   // the job failed
	ExitUsage       = 2   // bad input: nothing was started
	ExitInterrupted = 130 // stopped by Ctrl-C or SIGTERM
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad input: the message is printed and trainyard exits 2.
func usageError(err error) error { return &exitError{code: ExitUsage, err: err} }

// IO is where commands read and write; tests give their own.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// globals are the flags every command has.
type globals struct {
	io       IO
	logLevel string
}

func (g *globals) logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(g.io.Err, &slog.HandlerOptions{Level: level}))
}

// NewRoot returns the trainyard command with every subcommand registered.
func NewRoot(stdio IO) *cobra.Command {
	g := &globals{io: stdio}
	root := &cobra.Command{
		Use:   "trainyard",
		Short: "Run distributed PyTorch training on this machine's GPUs, or on Kubernetes",
		Long: `Trainyard runs distributed PyTorch training: a gang of workers started together,
wired for torch.distributed, torn down together when one fails, and restarted as a whole.

  trainyard run --workers 2 -- /usr/bin/python3 train.py     run a job here, in the foreground
  trainyard run -f job.yaml                                   the same job from a file
  trainyard results RUN                                       a run's metrics and checkpoints
  trainyard devices                                           the GPUs Trainyard can use

  trainyard server                                            queue jobs on this machine's GPUs
  trainyard submit -- python3 train.py                        run a job on the server
  trainyard list | get ID | logs -f ID | stop ID | top node   follow and manage its jobs

  trainyard install [--context NAME] [--image IMG]            put the operator and the TrainJob CRD on Kubernetes
  trainyard uninstall [--keep-crd]                            take them off again
  trainyard operator                                          the operator itself (what install deploys)
  trainyard submit --kube --image IMG -- python3 train.py     the same commands on a cluster (list, get, logs -f, stop, top ... --kube)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	root.SetIn(stdio.In)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "diagnostics on stderr: debug, info, warn or error")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(newRunCommand(g), newResultsCommand(g), newDevicesCommand(g), newVersionCommand(g))
	root.AddCommand(newServerCommand(g), newSubmitCommand(g), newListCommand(g), newGetCommand(g), newLogsCommand(g), newStopCommand(g), newDeleteCommand(g), newTopCommand(g))
	root.AddCommand(newInstallCommand(g), newUninstallCommand(g), newOperatorCommand(g))
	root.AddCommand(newWorkerCommand(g), newCopySelfCommand(g))
	return root
}

// Main runs trainyard with args and returns its exit code.
func Main(ctx context.Context, args []string, stdio IO) int {
	root := NewRoot(stdio)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	code := ExitUsage // cobra's own errors: unknown command, bad args
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stdio.Err, "trainyard: %s\n", msg)
	}
	return code
}

// Stdio is the process's own standard streams.
func Stdio() IO { return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }
