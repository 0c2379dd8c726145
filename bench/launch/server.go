package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// With -server, every plain round also submits the run to a `trainyard server
// --prestart` that the benchmark starts: the time is taken from starting `trainyard
// submit` (which prints the job's log) to the first "first step done" line, so it counts
// the request, the server's placement, the supervisor's start and the ranks'. After each
// such trial the benchmark waits for the server's standby to have imported torch (its
// Pythons idle), so that its imports slow no other trial.

// serverLauncher is `trainyard submit` to the benchmark's server; plain runs only.
var serverLauncher = launcher{name: "server", argv: serverArgv, rank0: trainyardRank0, plainOnly: true}

// serverArgv is `trainyard submit` of the run to the benchmark's server.
func serverArgv(cfg *config, _, _ string, restarts int, script []string) []string {
	argv := []string{cfg.trainyard, "submit", "--address", cfg.serverURL, "--workers", strconv.Itoa(ranks),
		"--max-restarts", strconv.Itoa(restarts), "--", cfg.python}
	return append(argv, script...)
}

// benchServer is the job server of a -server run.
type benchServer struct {
	cmd  *exec.Cmd
	dir  string
	done chan error
}

// startServer starts `trainyard server --prestart` on a free port with its state, runs
// and token under cfg.root/server, and waits until it answers.
func startServer(ctx context.Context, cfg *config) (*benchServer, error) {
	n, err := host.FreePort()
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(n)
	dir := filepath.Join(cfg.root, "server")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the server's folder: %w", err)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, fmt.Errorf("create the server's log: %w", err)
	}
	defer log.Close()
	addr := "127.0.0.1:" + port
	cmd := exec.Command(cfg.trainyard, "server", "--prestart", "--address", addr, "--state-dir", filepath.Join(dir, "state"),
		"--storage-path", filepath.Join(dir, "runs"))
	cmd.Env, cmd.Stdout, cmd.Stderr = cfg.env(), log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	s := &benchServer{cmd: cmd, dir: dir, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	cfg.serverURL = "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return s, nil
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("the server exited: %v: %s", err, tail(log.Name(), 600))
		case <-ctx.Done():
			s.stop(cfg.keep)
			return nil, ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			s.stop(cfg.keep)
			return nil, fmt.Errorf("the server did not listen on %s within a minute: %s", addr, tail(log.Name(), 600))
		}
	}
}

// stop stops the server, then kills every process left whose command line names its
// folder (supervisors of jobs a failed trial left; their ranks die with them) and the
// standby's Pythons, and removes the folder unless keep.
func (s *benchServer) stop(keep bool) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	procs, _ := allProcs()
	for _, p := range procs {
		if cmdline(p.pid, s.dir) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	if !keep {
		_ = os.RemoveAll(s.dir)
	}
}

// cmdline reports whether the command line of pid holds text.
func cmdline(pid int, text string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(b), text)
}

// waitStandby waits until the server's standby has started its Pythons and they have
// imported torch: each of them used no CPU for a second.
func (s *benchServer) waitStandby(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := map[int]uint64{}
	for ; time.Now().Before(deadline); time.Sleep(time.Second) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		spares := standbySpares(s.dir)
		idle := len(spares) >= ranks
		for pid, cpu := range spares {
			idle = idle && last[pid] == cpu
		}
		if idle {
			return nil
		}
		last = spares
	}
	return errors.New("the server's standby did not get its Pythons ready in time")
}

// standbySpares maps the pids of the children of the server's standby (a `run
// --standby` whose command line names dir) to the CPU time they used, in clock ticks.
func standbySpares(dir string) map[int]uint64 {
	out := map[int]uint64{}
	procs, _ := allProcs()
	for _, sb := range procs {
		if !cmdline(sb.pid, dir) || !cmdline(sb.pid, "--standby") {
			continue
		}
		for _, p := range procs {
			if p.ppid == sb.pid {
				out[p.pid] = p.cpu
			}
		}
	}
	return out
}
