package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/jobspec"
)

// tensorBoardStopDelay is how long a TensorBoard asked to stop (the command's context
// ended) has before it is killed.
const tensorBoardStopDelay = 5 * time.Second

const tensorBoardLong = `Start TensorBoard on a run's folder, in the foreground, until Ctrl-C: the curves of
every trainyard.report() (Trainyard writes them to events.out.tfevents.* files in the run
folder) and whatever the training script logs there with its own SummaryWriter.

RUN is a run name under --storage-path, or the path of a run's folder ('trainyard results'
lists the runs). --logdir points TensorBoard at another folder, such as the one a script's
SummaryWriter writes to. TensorBoard is not part of Trainyard: this runs the tensorboard
found on PATH (pip install tensorboard) with --logdir, --port and --host, and exits with
its exit code.`

// tensorBoardOptions are the flags of trainyard tensorboard.
type tensorBoardOptions struct {
	storage, logDir, host string
	port                  int
}

func newTensorBoardCommand(g *globals) *cobra.Command {
	var opts tensorBoardOptions
	cmd := &cobra.Command{
		Use:   "tensorboard RUN",
		Short: "Start TensorBoard (the one on PATH) on a run's metrics, in the foreground",
		Long:  tensorBoardLong,
		Example: `  trainyard tensorboard fashion-mnist
  trainyard tensorboard ~/trainyard_results/fashion-mnist --port 6007
  trainyard tensorboard fashion-mnist --logdir ./runs --host 0.0.0.0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTensorBoard(cmd.Context(), g, args[0], opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.storage, "storage-path", jobspec.DefaultStoragePath, "folder that holds runs, or s3://bucket/prefix (its runs staged on this machine)")
	f.StringVar(&opts.logDir, "logdir", "", "folder TensorBoard reads (default: the run's folder)")
	f.IntVar(&opts.port, "port", 6006, "port TensorBoard serves on")
	f.StringVar(&opts.host, "host", "127.0.0.1", "address TensorBoard listens on (loopback unless you need otherwise)")
	return cmd
}

// runTensorBoard finds the run and tensorboard, then runs tensorboard until it exits.
func runTensorBoard(ctx context.Context, g *globals, run string, opts tensorBoardOptions) error {
	if opts.port < 1 || opts.port > 65535 {
		return usageError(fmt.Errorf("--port %d: give a port from 1 to 65535", opts.port))
	}
	if opts.host == "" {
		return usageError(errors.New("--host: give the address TensorBoard listens on, such as 127.0.0.1"))
	}
	logDir, err := tensorBoardLogDir(run, opts)
	if err != nil {
		return usageError(err)
	}
	bin, err := exec.LookPath("tensorboard")
	if err != nil {
		return usageError(fmt.Errorf("tensorboard is not on PATH: install it with 'pip install tensorboard' "+
			"(in a virtual environment, or 'pipx install tensorboard'), then run this again; "+
			"the run's event files are in %s", logDir))
	}
	url := "http://" + net.JoinHostPort(opts.host, strconv.Itoa(opts.port))
	fmt.Fprintf(g.io.Out, "trainyard: TensorBoard on %s reads %s\n", url, logDir)
	if warning := eventFilesWarning(logDir, opts.logDir == ""); warning != "" {
		fmt.Fprintf(g.io.Err, "trainyard: warning: %s\n", warning)
	}
	return foreground(ctx, g, bin, "--logdir", logDir, "--port", strconv.Itoa(opts.port), "--host", opts.host)
}

// tensorBoardLogDir is the absolute folder TensorBoard reads: --logdir, else the run's
// folder (where reporting writes the events files). The run must exist either way.
func tensorBoardLogDir(run string, opts tensorBoardOptions) (string, error) {
	if strings.HasPrefix(run, "~/") {
		if p, err := expandHome(run); err == nil {
			run = p
		}
	}
	dir, err := runFolder(run, opts.storage)
	if err != nil {
		list := "'trainyard results'"
		if opts.storage != jobspec.DefaultStoragePath {
			list = "'trainyard results --storage-path " + opts.storage + "'"
		}
		return "", fmt.Errorf("%w; %s lists the runs", err, list)
	}
	if opts.logDir != "" {
		dir = opts.logDir
	}
	abs, err := expandHome(dir)
	if err != nil {
		return "", fmt.Errorf("--logdir: %w", err)
	}
	if st, err := os.Stat(abs); err == nil && !st.IsDir() {
		return "", fmt.Errorf("--logdir %s is not a folder: give the folder that holds the events.out.tfevents.* files", abs)
	}
	return abs, nil
}

// eventFilesWarning says why TensorBoard would show nothing in dir yet: it does not exist,
// or no file in it or below (TensorBoard reads subfolders as runs) has "tfevents" in its
// name, as TensorBoard requires. It is "" when there are event files. isRun says dir is
// the run's folder, where the reports write them.
func eventFilesWarning(dir string, isRun bool) string {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return dir + " does not exist yet; TensorBoard shows nothing until something writes event files there"
	}
	found := false
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.Contains(d.Name(), "tfevents") {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	switch {
	case found:
		return ""
	case isRun:
		return "no TensorBoard event files (events.out.tfevents.*) in " + dir +
			" yet; they appear with the run's first trainyard.report()"
	}
	return "no TensorBoard event files (events.out.tfevents.*) in " + dir + " yet"
}

// foreground runs bin with args, with the command's stdout and stderr, until it exits,
// and returns its exit code as an error (nil for 0). It runs in its own process group,
// so a Ctrl-C reaches it once, from here: the first SIGINT or SIGTERM is forwarded, a
// second kills it. Should trainyard die, the kernel kills it too (Pdeathsig).
func foreground(ctx context.Context, g *globals, bin string, args ...string) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = g.io.Out, g.io.Err
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = tensorBoardStopDelay
	if err := cmd.Start(); err != nil {
		return failed(fmt.Errorf("start %s: %w", bin, err))
	}
	done := make(chan struct{})
	defer close(done)
	go forwardSignals(cmd.Process, sigs, done)
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &exitError{code: 128 + int(ws.Signal()), err: fmt.Errorf("%s was killed by %s", bin, ws.Signal())}
		}
		return &exitError{code: ee.ExitCode(), err: fmt.Errorf("%s exited with code %d", bin, ee.ExitCode())}
	}
	return failed(fmt.Errorf("wait for %s: %w", bin, err))
}

// forwardSignals sends p the first signal from sigs and kills it on the second, until
// done is closed. os.Process signals only a process not yet reaped (a pidfd on Linux), so
// a reused pid is never signalled.
func forwardSignals(p *os.Process, sigs <-chan os.Signal, done <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		case sig := <-sigs:
			if n == 0 {
				_ = p.Signal(sig)
			} else {
				_ = p.Kill()
			}
		}
	}
}
