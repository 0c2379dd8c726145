package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/kubeconfig"
	"github.com/trainyard/trainyard/internal/operator"
)

// childCommand, as the first argument, makes this program run the operator itself
// (-operator-qps): the same operator.Run that `trainyard operator` calls, with the client
// QPS set.
const childCommand = "run-operator"

// readyLine is what controller-runtime logs once the TrainJob controller's caches are in
// sync and its workers run.
const readyLine = "Starting workers"

// operatorProc is the operator process the benchmark started.
type operatorProc struct {
	cmd     *exec.Cmd
	args    []string // its command line, for the report
	logPath string
	started time.Duration // from exec to readyLine in its log
	done    chan struct{} // closed when the process has exited and been reaped
	waitErr error         // cmd.Wait's answer, once done is closed
}

// startOperator starts the operator against the control plane and waits until its
// controller runs.
func startOperator(ctx context.Context, cfg *config, kubeconfigPath string) (*operatorProc, error) {
	o := &operatorProc{logPath: filepath.Join(cfg.root, "operator.log")}
	if cfg.operatorQPS == 0 {
		o.args = []string{cfg.binary, "operator", "--kubeconfig", kubeconfigPath, "--image", cfg.image,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	} else {
		o.args = []string{cfg.binary, childCommand, "-kubeconfig", kubeconfigPath, "-image", cfg.image,
			"-qps", strconv.FormatFloat(cfg.operatorQPS, 'g', -1, 64)}
		if cfg.cpuProfile != "" {
			o.args = append(o.args, "-cpuprofile", cfg.cpuProfile)
		}
	}
	log, err := os.Create(o.logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	o.cmd = exec.Command(o.args[0], o.args[1:]...)
	o.cmd.Stdout, o.cmd.Stderr = log, log
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := o.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the operator: %w", err)
	}
	o.done = make(chan struct{})
	go func() {
		o.waitErr = o.cmd.Wait()
		close(o.done)
	}()
	if err := o.waitReady(ctx); err != nil {
		o.kill()
		return nil, err
	}
	o.started = time.Since(start)
	return o, nil
}

// waitReady waits up to a minute for readyLine in the operator's log.
func (o *operatorProc) waitReady(ctx context.Context) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if data, err := os.ReadFile(o.logPath); err == nil && bytes.Contains(data, []byte(readyLine)) {
			return nil
		}
		select {
		case <-o.done:
			return fmt.Errorf("the operator exited at start; see %s", o.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("the operator did not log %q within a minute; see %s", readyLine, o.logPath)
}

func (o *operatorProc) pid() int { return o.cmd.Process.Pid }

// memory reads the operator's VmRSS and VmHWM.
func (o *operatorProc) memory() (host.Memory, error) { return host.ReadMemory(o.pid()) }

// commandLine is the operator's command line with the run's folder left out.
func (o *operatorProc) commandLine(root string) string {
	parts := make([]string, len(o.args))
	for i, a := range o.args {
		parts[i] = strings.ReplaceAll(a, root+"/", "")
	}
	if parts[1] == childCommand {
		parts[0] = "bench/operator"
	}
	return strings.Join(parts, " ")
}

// stop sends SIGTERM to the operator and waits up to 20 seconds for it to exit, then
// kills it.
func (o *operatorProc) stop() error {
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-o.done:
		if o.waitErr != nil {
			return fmt.Errorf("the operator exited with %v; see %s", o.waitErr, o.logPath)
		}
		return nil
	case <-time.After(20 * time.Second):
		o.kill()
		return fmt.Errorf("the operator did not stop within 20s of SIGTERM; see %s", o.logPath)
	}
}

// kill kills the operator's process group.
func (o *operatorProc) kill() {
	_ = syscall.Kill(-o.pid(), syscall.SIGKILL)
	<-o.done
}

// runOperatorChild is this program running the operator as `trainyard operator` would,
// except that the client's QPS is set: -qps -1 turns client-side limiting off (what
// controller-runtime's ctrl.GetConfig does), a positive value sets QPS and a burst of
// twice as much.
func runOperatorChild(args []string) error {
	fs := flag.NewFlagSet(childCommand, flag.ContinueOnError)
	var kube kubeconfig.Flags
	var opts operator.Options
	var qps float64
	fs.StringVar(&kube.Kubeconfig, "kubeconfig", "", "kubeconfig file")
	fs.StringVar(&opts.Image, "image", "", "the trainyard image")
	fs.Float64Var(&qps, "qps", -1, "client QPS (-1: no client-side limit)")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the operator to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg, err := kube.RESTConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "trainyard-operator/bench"
	opts.QPS, opts.Burst = float32(qps), max(0, int(2*qps)) // NewManager applies them to cfg
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return operator.Run(ctx, cfg, opts, logger)
}

// operatorClientLimits describes the client-side rate limit the operator's API client
// gets from `trainyard operator`'s way of loading a kubeconfig (internal/kubeconfig), or
// the one -operator-qps sets.
func operatorClientLimits(cfg *config) string {
	if cfg.operatorQPS < 0 {
		return "QPS -1 set by this benchmark (-operator-qps): no client-side limit"
	}
	if cfg.operatorQPS > 0 {
		return fmt.Sprintf("QPS %g, burst %d set by this benchmark (-operator-qps)", cfg.operatorQPS, int(2*cfg.operatorQPS))
	}
	return fmt.Sprintf("QPS %d, burst %d: the defaults of `trainyard operator --kube-api-qps/--kube-api-burst`, for each API kind "+
		"(controller-runtime makes one REST client, with its own limiter, per kind)", operator.DefaultQPS, operator.DefaultBurst)
}
