package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// component is a process the benchmark runs beside the control plane:
// kube-controller-manager, or KubeRay's operator.
type component struct {
	name    string
	cmd     *exec.Cmd
	args    []string
	logPath string
	done    chan struct{} // closed once the process exited and was reaped
	waitErr error
}

// startComponent starts bin with args (and env added to the benchmark's), its output in
// name.log under the run's folder, in a process group of its own that dies with the
// benchmark.
func startComponent(cfg *config, name string, env []string, bin string, args ...string) (*component, error) {
	c := &component{name: name, args: append([]string{bin}, args...), logPath: filepath.Join(cfg.root, name+".log")}
	log, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	c.cmd = exec.Command(bin, args...)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.done = make(chan struct{})
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *component) pid() int { return c.cmd.Process.Pid }

// memory reads the process's VmRSS and VmHWM.
func (c *component) memory() (host.Memory, error) { return host.ReadMemory(c.pid()) }

// waitLog waits up to limit for line in the process's log.
func (c *component) waitLog(ctx context.Context, line string, limit time.Duration) error {
	return c.waitUntil(ctx, limit, fmt.Sprintf("log %q", line), func() bool {
		data, err := os.ReadFile(c.logPath)
		return err == nil && bytes.Contains(data, []byte(line))
	})
}

// waitUntil waits up to limit for ok, failing at once if the process exits.
func (c *component) waitUntil(ctx context.Context, limit time.Duration, what string, ok func() bool) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if ok() {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited at start; see %s", c.name, c.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not %s within %s; see %s", c.name, what, limit, c.logPath)
}

// stop sends SIGTERM and waits up to 20 seconds, then kills the process group.
func (c *component) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("%s did not stop within 20s of SIGTERM; see %s", c.name, c.logPath)
	}
}

// kcmArgs are kube-controller-manager's flags: its defaults (every controller that is on
// by default, client QPS 20 and burst 30, leader election), with only what it must be
// told: the control plane's address and credentials, and no serving port (the machine is
// shared; serving is not what is measured).
func kcmArgs(kubeconfig string) []string {
	return []string{"--kubeconfig", kubeconfig, "--secure-port=0"}
}

// startKCM starts kube-controller-manager against the control plane and waits until its
// controllers run: the service account controller made the default ServiceAccount of
// every namespace.
func startKCM(ctx context.Context, cfg *config, cp *controlPlane, namespaces ...string) (*component, error) {
	c, err := startComponent(cfg, "kube-controller-manager", nil, cfg.kcm, kcmArgs(cp.kubeconfig)...)
	if err != nil {
		return nil, err
	}
	err = c.waitUntil(ctx, 2*time.Minute, "make the namespaces' default ServiceAccounts", func() bool {
		for _, ns := range namespaces {
			var sa corev1.ServiceAccount
			if cp.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &sa) != nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		_ = c.stop()
		return nil, err
	}
	return c, nil
}

// commandLine is the process's command line with the run's folder left out.
func (c *component) commandLine(root string) string {
	return strings.ReplaceAll(strings.Join(c.args, " "), root+"/", "")
}
