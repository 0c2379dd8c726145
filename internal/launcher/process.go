package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/logstream"
)

// killFunc sends a signal to a process or, with a negative pid, a process group:
// syscall.Kill, or a test's recorder.
type killFunc func(pid int, sig syscall.Signal) error

// process is one running worker process and the goroutine copying its output. Its process
// group is signalled only while the group's leader (the worker) is not reaped: once reaped,
// the group id is free for the kernel to give to another process.
type process struct {
	proc    Proc
	os      *os.Process // this launcher's child: started here, or adopted with a spare
	pid     int
	started time.Time
	copied  chan error // receives the copy result once the output pipe is closed
	kill    killFunc
	spoke   atomic.Bool // it printed something

	mu     sync.Mutex
	reaped bool // the leader was reaped, or is about to be: its group is never signalled again
}

// exit is what became of a process.
type exit struct {
	idx   int
	at    time.Time
	code  int    // -1 when killed by a signal or never started
	sig   string // "SIGKILL" when killed by a signal
	err   error  // a failure to start or wait
	state *os.ProcessState
}

// failed reports whether the exit is a failure of the worker.
func (e exit) failed() bool { return e.err != nil || e.code != 0 }

// describe says what happened in words: "exited with code 3", "was killed by SIGKILL".
func (e exit) describe() string {
	switch {
	case e.err != nil:
		return "could not run: " + e.err.Error()
	case e.sig != "":
		return "was killed by " + e.sig
	default:
		return fmt.Sprintf("exited with code %d", e.code)
	}
}

// start starts one worker process in its own process group, with stdout and stderr on
// one pipe that a goroutine copies to log and console. Once started, the process owns
// log and closes it when its output ends.
func start(path string, args []string, dir string, env []string, p Proc, log *os.File, console *logstream.Console, touch func(), kill killFunc) (*process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start rank %d: %w", p.Rank, err)
	}
	cmd := &exec.Cmd{
		Path: path, Args: args, Dir: dir, Env: env, Stdout: w, Stderr: w,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start rank %d: %w", p.Rank, err)
	}
	return attach(cmd.Process, r, p, log, console, touch, kill), nil
}

// attach follows a started process: a goroutine copies its output from r to log and
// console.
func attach(child *os.Process, r *os.File, p Proc, log *os.File, console *logstream.Console, touch func(), kill killFunc) *process {
	pr := &process{proc: p, os: child, pid: child.Pid, started: time.Now(), copied: make(chan error, 1), kill: kill}
	src := logstream.Source{Rank: p.Rank, PID: pr.pid}
	heard := func() { pr.spoke.Store(true); touch() }
	go func() {
		err := logstream.Copy(touchReader{r, heard}, src, log, console)
		r.Close()
		if cerr := log.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close log of rank %d: %w", p.Rank, cerr)
		}
		pr.copied <- err
	}()
	return pr
}

// wait waits for the process and describes its end. It first waits for the leader's exit
// without reaping it: the zombie keeps the pid, and so the group id, from being reused
// while wait kills what is left of the group (children such as DataLoader workers). Then
// it reaps the leader, and the group is never signalled again.
func (pr *process) wait(idx int) exit {
	exitedErr := waitExited(pr.pid)
	pr.mu.Lock()
	if exitedErr == nil {
		_ = pr.kill(-pr.pid, syscall.SIGKILL) // an error: the group is empty
	}
	pr.reaped = true
	pr.mu.Unlock()
	state, err := pr.os.Wait()
	e := exit{idx: idx, at: time.Now(), code: -1, state: state}
	switch {
	case err != nil:
		e.err = err
	case state.Success():
		e.code = 0
	default:
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.sig = unix.SignalName(ws.Signal())
		} else {
			e.code = state.ExitCode()
		}
	}
	return e
}

// waitExited waits until the child pid has exited, leaving it unreaped (a zombie).
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// signal sends sig to the process group of the worker: the worker and every child it
// started. It does nothing once the worker was reaped. An error (the group is gone) is
// ignored.
func (pr *process) signal(sig syscall.Signal) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.reaped {
		_ = pr.kill(-pr.pid, sig)
	}
}

// gpuList formats GPUs as NVML indices, "0,1".
func gpuList(gpus []device.GPU) string {
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = fmt.Sprint(g.Index)
	}
	return strings.Join(ids, ",")
}

// touchReader calls touch whenever it reads something: the process is alive and talking.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}
