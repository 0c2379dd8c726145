package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// runTorchrunTrial runs one trial of the torchrun mode (see the package documentation):
// three elastic agents, the third's node lost at step -at, then a third agent back.
func runTorchrunTrial(c config) (result, error) {
	r := result{mode: "torchrun", from: 3, to: 2}
	dir, err := os.MkdirTemp("", "bench-resize-torchrun-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	port, err := host.FreePort()
	if err != nil {
		return r, err
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return r, err
	}
	defer rd.Close()
	g := &gang{done: make(chan struct{})}
	go g.scan(rd)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var agents []*exec.Cmd
	start := func(host bool) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, c.torchrun, c.torchrunArgs(port, host, dir)...)
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "PYTHONPATH="+helperDir(),
			"STEP_S="+strconv.FormatFloat(c.step.Seconds(), 'f', -1, 64), "CKPT_EVERY="+strconv.Itoa(c.every),
			"CKPT_DIR="+dir, "OMP_NUM_THREADS=1")
		cmd.Stdout, cmd.Stderr = wr, wr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start torchrun: %w", err)
		}
		agents = append(agents, cmd)
		return cmd, nil
	}
	defer func() {
		for _, a := range agents {
			_ = syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
			_ = a.Wait()
		}
		wr.Close()
	}()
	var third *exec.Cmd
	for i := range 3 {
		if third, err = start(i == 0); err != nil {
			return r, err
		}
	}
	if _, _, err := g.wait(0, c.timeout, fmt.Sprintf("step %d with 3 workers", c.at), func(l line) bool {
		return l.world == 3 && l.step >= c.at
	}); err != nil {
		return r, err
	}
	mark, event := g.len(), time.Now()
	if err := syscall.Kill(-third.Process.Pid, syscall.SIGKILL); err != nil { // its node is gone
		return r, fmt.Errorf("kill the third agent: %w", err)
	}
	again, lostSteps, last, err := trainAgain(g, mark, event, 2, c.timeout)
	if err != nil {
		return r, err
	}
	r.again, r.lost = again, lostSteps
	if _, _, err := g.wait(last, c.timeout, "more steps with 2 workers", func(l line) bool {
		return l.world == 2 && l.step >= c.at*2
	}); err != nil {
		return r, err
	}
	mark, grow := g.len(), time.Now()
	if _, err := start(false); err != nil {
		return r, err
	}
	r.growAgain, r.growLost, _, err = trainAgain(g, mark, grow, 3, c.timeout)
	r.grew = err == nil
	return r, err
}

// torchrunArgs is one elastic agent's command line: 2 to 3 nodes of one process, the
// c10d rendezvous on this machine's port, hosted by the first agent. Debian's torchrun
// needs --redirects and --tee on Python 3.11 (a local rank 9 that no agent has leaves
// the output as it is).
func (c config) torchrunArgs(port int, host bool, dir string) []string {
	conf := "is_host=" + strconv.FormatBool(host)
	if c.lastCall != "" {
		conf += ",last_call_timeout=" + c.lastCall
	}
	return []string{"--nnodes", "2:3", "--nproc_per_node", "1", "--max_restarts", "10",
		"--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:" + strconv.Itoa(port), "--rdzv_id", "bench",
		"--rdzv_conf", conf, "--redirects", "9:1", "--tee", "9:1", "--log_dir", filepath.Join(dir, "logs"),
		c.script}
}

// helperDir is the repository's python folder, which holds the trainyard module the
// script imports (trainyard run provides it; torchrun does not).
func helperDir() string {
	d, _ := filepath.Abs("python")
	return d
}
