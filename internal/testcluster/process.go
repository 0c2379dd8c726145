package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// component is one process of the cluster, its output in <root>/logs/<name>.log and its
// pid in <root>/pids/<name>.pid (so that a later Start can stop what a killed test left).
type component struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (c *Cluster) start(name, bin string, args ...string) (*component, error) {
	logPath := filepath.Join(c.root, "logs", name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	comp := &component{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		comp.err = cmd.Wait()
		out.Close()
		close(comp.done)
	}()
	pidFile := filepath.Join(c.root, "pids", name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.components = append(c.components, comp)
	return comp, nil
}

// exited says whether the component has ended, and how, with its last log lines.
func (comp *component) exited() error {
	select {
	case <-comp.done:
		return fmt.Errorf("%s exited (%v); its last log lines:\n%s", comp.name, comp.err, tail(comp.log, 15))
	default:
		return nil
	}
}

// stop ends the component: SIGTERM, then SIGKILL after grace; SIGKILL at once when
// grace is 0.
func (comp *component) stop(grace time.Duration) {
	select {
	case <-comp.done:
		return
	default:
	}
	if grace == 0 {
		_ = syscall.Kill(-comp.cmd.Process.Pid, syscall.SIGKILL)
		<-comp.done
		return
	}
	_ = syscall.Kill(-comp.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-comp.done:
	case <-time.After(grace):
		_ = syscall.Kill(-comp.cmd.Process.Pid, syscall.SIGKILL)
		<-comp.done
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + string(bytes.Join(lines, []byte("\n  ")))
}

// killLeftovers stops the processes a previous cluster under root left running: each pid
// file's process, checked first to be ours (its command line names root), and every
// containerd shim serving root's containerd.
func killLeftovers(root string) {
	files, _ := filepath.Glob(filepath.Join(root, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && cmdlineMentions(pid, root) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.Remove(f)
	}
	killShims(root)
}

// killShims kills the containerd shims started for root's containerd.
func killShims(root string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err == nil && bytes.Contains(b, []byte("containerd-shim")) && bytes.Contains(b, []byte(root)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func cmdlineMentions(pid int, s string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte(s))
}

// waitFor polls ok every 200 ms until it returns true, an error, a component exits, or
// timeout passes; what names the wait in the error.
func (c *Cluster) waitFor(what string, timeout time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		done, err := ok()
		if done {
			return nil
		}
		if err != nil {
			last = err
		}
		for _, comp := range c.components {
			if err := comp.exited(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("no error, just not yet")
			}
			return fmt.Errorf("%s not within %s (last: %v)", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
