package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/kubecli"
)

// Version is the build's version, set at link time with -X.
var Version = "dev"

// Exit codes of the trainyard command, the same for every subcommand.
const (
	ExitOK          = 0
	ExitFailed      = 1   // the job failed, or something did: a server or cluster unreachable, a job not found
	ExitUsage       = 2   // bad input, found here or refused as such by the server or cluster: nothing was done
	ExitInterrupted = 130 // stopped by Ctrl-C, SIGTERM or SIGHUP
)

// exitCodesHelp says the exit codes in the help of the trainyard command.
const exitCodesHelp = `Exit codes: 0 done, 1 failed (the job, or reaching what runs it; a job that is not
found), 2 bad input (nothing was done), 130 interrupted. A mistyped flag is answered with
the nearest ones: "unknown flag: --worker; did you mean --workers?".`

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad input: the message is printed and trainyard exits 2.
func usageError(err error) error { return &exitError{code: ExitUsage, err: err} }

// exitCode is the code trainyard exits with after err. A request the server or the
// cluster refused as bad input is bad input whatever the command made of it; otherwise
// an error carries its code (markFailures gives every command's errors one); an error
// that carries none is cobra's own, from before any command ran (an unknown command or
// wrong arguments), so bad input.
func exitCode(err error) int {
	var (
		ae *client.APIError
		ie *kubecli.InputError
		ee *exitError
	)
	switch {
	case errors.As(err, &ae) && refusedInput(ae.Status), errors.As(err, &ie):
		return ExitUsage
	case errors.As(err, &ee):
		return ee.code
	}
	return ExitUsage
}

// refusedInput reports whether an HTTP status is the server's refusal of bad input: a
// malformed or impossible request (400, 422: an invalid job, one that can never fit, an
// unknown status), or one too large or of the wrong type (413, 415). A job that is not
// found (404) or not in a state for the request (409) is a failure, as Ray's CLI has it.
func refusedInput(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

// markFailures makes an error that a command of c's tree returns without an exit code a
// failure (exit 1): bad input is marked as such where it is found.
func markFailures(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return &exitError{code: ExitFailed, err: err}
		}
	}
	for _, sub := range c.Commands() {
		markFailures(sub)
	}
}

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
		Long: `Trainyard runs distributed PyTorch training: a gang of workers started together, wired
for torch.distributed, torn down together when one fails, and restarted as a whole.

On this machine:
  trainyard run --workers 2 -- python3 train.py    run a job here, in the foreground
  trainyard run -f job.yaml                        the same job from a file
  trainyard results [RUN]                          the runs, or one run's metrics
  trainyard tensorboard RUN                        TensorBoard (the one on PATH) on a run
  trainyard devices                                the GPUs Trainyard can use

On a job server, which queues jobs on its machine's GPUs:
  trainyard server                                 start one on this machine
  trainyard submit -- python3 train.py             run a job on the server
  trainyard list | get | logs -f | stop | delete   follow and manage its jobs
  trainyard top node | top job                     its machine's resources, jobs' use

On Kubernetes:
  trainyard install [--context NAME]               put the operator and its CRD there
  trainyard uninstall [--keep-crd]                 take them off again
  trainyard operator                               the operator (what install deploys)
  trainyard submit --kube --image IMG -- python3 train.py
                                                   the same on a cluster; so are list,
                                                   get, logs -f, stop, top with --kube

` + jobspec.NameRuleHelp + `

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(debug.ReadBuildInfo()).String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().BoolP("version", "v", false, "print trainyard's version, commit and build date, as trainyard version does")
	root.SetUsageTemplate(wrapFlags(root.UsageTemplate()))
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	root.SetIn(stdio.In)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "diagnostics on stderr: debug, info, warn or error")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w%s (see '%s --help')", err, flagHint(c, err), c.CommandPath()))
	})
	root.AddCommand(newRunCommand(g), newResultsCommand(g), newTensorBoardCommand(g), newDashboardCommand(g), newOpenCommand(g), newDevicesCommand(g), newVersionCommand(g))
	root.AddCommand(newServerCommand(g), newSubmitCommand(g), newListCommand(g), newGetCommand(g), newLogsCommand(g), newStopCommand(g), newDeleteCommand(g), newTopCommand(g), newDataCommand(g))
	root.AddCommand(newInstallCommand(g), newUninstallCommand(g), newOperatorCommand(g))
	root.AddCommand(newWorkerCommand(g), newCopySelfCommand(g), newPythonPathCommand(g))
	markFailures(root)
	addCompletions(root)
	return root
}

// helpWidth is the width help texts are written for; flag descriptions are wrapped to it.
const helpWidth = 100

func init() {
	cobra.AddTemplateFunc("wrappedFlagUsages", flagUsages)
}

// wrapFlags returns cobra's usage template with the flags' descriptions wrapped to
// helpWidth, as kubectl wraps them, instead of one line of any length per flag.
func wrapFlags(template string) string {
	return strings.NewReplacer("{{.LocalFlags.FlagUsages", "{{wrappedFlagUsages .LocalFlags",
		"{{.InheritedFlags.FlagUsages", "{{wrappedFlagUsages .InheritedFlags").Replace(template)
}

// flagHint is what a flag error adds: for a user who reached for another command's
// flag, what c has instead; for a mistyped flag, the nearest flags of c.
func flagHint(c *cobra.Command, err error) string {
	if c.Name() == "run" && strings.Contains(err.Error(), "unknown flag: --working-dir") {
		return "; run starts the workers in --workdir, a folder of this machine; --working-dir is submit's, which uploads a folder to a server"
	}
	return suggestFlag(c, err)
}

// Main runs trainyard with args and returns its exit code.
func Main(ctx context.Context, args []string, stdio IO) int {
	root := NewRoot(stdio)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stdio.Err, "trainyard: %s\n", msg)
	}
	return code
}

// Stdio is the process's own standard streams.
func Stdio() IO { return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }
