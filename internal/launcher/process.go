package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/logstream"
)

// process is one running worker process and the goroutine copying its output.
type process struct {
	proc    Proc
	cmd     *exec.Cmd
	pid     int
	started time.Time
	copied  chan error // receives the copy result once the output pipe is closed
	exited  bool       // set by the supervising goroutine once Wait returned
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
func start(path string, args []string, dir string, env []string, p Proc, log *os.File, console *logstream.Console, touch func()) (*process, error) {
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
	pr := &process{proc: p, cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), copied: make(chan error, 1)}
	src := logstream.Source{Rank: p.Rank, PID: pr.pid}
	go func() {
		err := logstream.Copy(touchReader{r, touch}, src, log, console)
		r.Close()
		if cerr := log.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close log of rank %d: %w", p.Rank, cerr)
		}
		pr.copied <- err
	}()
	return pr, nil
}

// wait waits for the process and describes its end.
func (pr *process) wait(idx int) exit {
	err := pr.cmd.Wait()
	e := exit{idx: idx, at: time.Now(), code: -1, state: pr.cmd.ProcessState}
	var ee *exec.ExitError
	switch {
	case err == nil:
		e.code = 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.sig = unix.SignalName(ws.Signal())
		} else {
			e.code = ee.ExitCode()
		}
	default:
		e.err = err
	}
	return e
}

// signalGroup sends sig to the process group led by pid: the worker and every child it
// started. The kernel does not reuse a pid while its group has members, so this is safe
// after the leader exited too. An error (the group is gone) is ignored.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
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
