package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// drainTimeout bounds the wait for the end of a launcher's stdout after it exited.
const drainTimeout = 5 * time.Second

// trialSpec says which trial to run.
type trialSpec struct {
	launcher launcher
	kind     trialKind
	round    int // 1-based; negative for warm-up rounds
}

// trialResult is what one trial measured, or why it failed.
type trialResult struct {
	spec      trialSpec
	firstStep time.Duration // launch to the first "first step done" (plain runs)
	stepTime  time.Duration // median of rank 0's step times from steadyFrom (plain runs)
	steps     int           // how many step times that median took
	recovery  time.Duration // SIGKILL of rank 1 to the next "first step done" (restarts)
	omp       string        // OMP_NUM_THREADS of the killed rank (restarts)
	dir       string        // the trial's folder
	err       error
}

// line is the trial's raw result on one line.
func (r trialResult) line() string {
	head := fmt.Sprintf("%-9s  %-7s  ", r.spec.launcher.name, r.spec.kind)
	switch {
	case r.err != nil:
		return head + "FAILED: " + r.err.Error()
	case r.spec.kind == restartRun:
		return head + fmt.Sprintf("SIGKILL rank 1 -> restarted first step %s  (worker OMP_NUM_THREADS=%s)  exit 0",
			seconds(r.recovery), r.omp)
	}
	return head + fmt.Sprintf("launch -> first step %s  step time p50 %s over %d steps  exit 0",
		seconds(r.firstStep), millis(r.stepTime), r.steps)
}

// stamped is one stdout line and when the benchmark read it.
type stamped struct {
	at   time.Time
	text string
}

// trial is a running trial: its launcher process and what it has seen so far.
type trial struct {
	spec     trialSpec
	cmd      *exec.Cmd
	started  time.Time
	lines    chan stamped
	exited   chan error
	track    *tracker
	first    time.Time
	steps    map[int]float64
	killedAt time.Time
	restart  time.Time
	omp      string
	reaped   bool // the launcher's exit was received
}

// runTrial runs one trial in a fresh folder under cfg.root and measures it. The folder
// is removed afterwards unless the trial failed or cfg.keep is set.
func runTrial(ctx context.Context, cfg *config, spec trialSpec) trialResult {
	res := trialResult{spec: spec}
	dir, err := os.MkdirTemp(cfg.root, fmt.Sprintf("r%d-%s-%s-", spec.round, spec.launcher.name, spec.kind))
	if err != nil {
		res.err = fmt.Errorf("create trial folder: %w", err)
		return res
	}
	res.dir = dir
	res.err = measure(ctx, cfg, spec, dir, &res)
	if res.err != nil {
		res.err = fmt.Errorf("%w (folder %s)", res.err, dir)
	} else if !cfg.keep {
		_ = os.RemoveAll(dir)
	}
	return res
}

// measure starts the trial's launcher, watches it to the end and fills in res.
func measure(ctx context.Context, cfg *config, spec trialSpec, dir string, res *trialResult) error {
	n, err := host.FreePort()
	if err != nil {
		return err
	}
	port := strconv.Itoa(n)
	argv := spec.launcher.argv(cfg, dir, port, restartsFor(spec.kind), scriptArgs(cfg, spec.kind))
	t, err := startTrial(spec, argv, dir, cfg.env())
	if err != nil {
		return err
	}
	defer t.stop()
	if err := t.watch(ctx, cfg.timeout); err != nil {
		return fmt.Errorf("%w; stderr: %s", err, tail(filepath.Join(dir, "stderr.log"), 600))
	}
	return t.result(res)
}

// startTrial starts the launcher in its own process group, with stdout on a pipe read
// line by line and stderr in dir/stderr.log.
func startTrial(spec trialSpec, argv []string, dir string, env []string) (*trial, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	defer w.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("create stderr log: %w", err)
	}
	defer stderr.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, w, stderr, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t := &trial{spec: spec, cmd: cmd, lines: make(chan stamped, 1<<16), exited: make(chan error, 1),
		steps: map[int]float64{}}
	t.started = time.Now()
	if err := cmd.Start(); err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s: %w", spec.launcher.name, err)
	}
	t.track = &tracker{root: cmd.Process.Pid, seen: map[procStat]bool{}}
	go readLines(r, filepath.Join(dir, "stdout.log"), t.lines)
	go func() { t.exited <- cmd.Wait() }()
	return t, nil
}

// stop kills whatever is left of the launcher and its workers, and reaps the launcher
// (waiting a few seconds at most), so no zombie outlives the benchmark.
func (t *trial) stop() {
	t.track.killAll()
	if t.reaped {
		return
	}
	select {
	case <-t.exited:
	case <-time.After(drainTimeout):
	}
}

// readLines sends every line of r, stamped with the time it was read, to out, copies it
// to the file logPath, and closes out at the end of r.
func readLines(r *os.File, logPath string, out chan<- stamped) {
	defer close(out)
	defer r.Close()
	log, _ := os.Create(logPath) // nil if it cannot be created: the copy is for debugging only
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out <- stamped{at: time.Now(), text: sc.Text()}
		if log != nil {
			fmt.Fprintln(log, sc.Text())
		}
	}
	if log != nil {
		log.Close()
	}
}

// watch follows the launcher's stdout and exit until both have ended, the timeout
// passes, or ctx ends. It returns an error if the launcher did not exit 0.
func (t *trial) watch(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var drain <-chan time.Time
	var exitErr error
	lines, exited := t.lines, t.exited
	for lines != nil || exited != nil {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
			} else if err := t.observe(l); err != nil {
				return err
			}
		case exitErr = <-exited:
			t.reaped = true
			exited, drain = nil, time.After(drainTimeout)
		case <-drain:
			return fmt.Errorf("stdout still open %s after the launcher exited", drainTimeout)
		case <-deadline.C:
			return fmt.Errorf("timed out after %s", timeout)
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
	}
	if exitErr != nil {
		return fmt.Errorf("%s exited: %w", t.spec.launcher.name, exitErr)
	}
	return nil
}

// observe takes one stdout line: first steps, rank 0's step times, and for restart
// trials the kill of rank 1 once rank 0 logged killAtStep.
func (t *trial) observe(l stamped) error {
	if strings.Contains(l.text, firstStepMsg) {
		t.sawFirstStep(l.at)
	}
	text, ok := t.spec.launcher.rank0(l.text)
	if !ok || !t.killedAt.IsZero() {
		return nil
	}
	step, secs, ok := parseStep(text)
	if !ok {
		return nil
	}
	if _, dup := t.steps[step]; !dup {
		t.steps[step] = secs
	}
	if t.spec.kind == restartRun && step >= killAtStep {
		return t.killRank1()
	}
	return nil
}

// sawFirstStep records a "first step done" line: the launch's first one, and the first
// one after the kill. The workers are all up by then, so it also records them.
func (t *trial) sawFirstStep(at time.Time) {
	switch {
	case t.first.IsZero():
		t.first = at
	case !t.killedAt.IsZero() && t.restart.IsZero():
		t.restart = at
	default:
		return
	}
	t.track.snapshot()
}

// killRank1 sends SIGKILL to the launcher's topmost descendant with RANK=1.
func (t *trial) killRank1() error {
	pid, env, err := findRank(t.cmd.Process.Pid, "1")
	if err != nil {
		return fmt.Errorf("find rank 1 at step %d: %w", killAtStep, err)
	}
	t.track.snapshot()
	t.omp = env["OMP_NUM_THREADS"]
	t.killedAt = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill rank 1 (pid %d): %w", pid, err)
	}
	return nil
}

// result checks that the trial saw what its kind needs and fills in res.
func (t *trial) result(res *trialResult) error {
	if t.first.IsZero() {
		return errors.New("no \"first step done\" line")
	}
	if t.spec.kind == restartRun {
		if t.killedAt.IsZero() || t.restart.IsZero() {
			return fmt.Errorf("no restarted first step (killed: %v)", !t.killedAt.IsZero())
		}
		res.recovery, res.omp = t.restart.Sub(t.killedAt), t.omp
		return nil
	}
	var times []float64
	for step, secs := range t.steps {
		if step >= steadyFrom {
			times = append(times, secs)
		}
	}
	if len(times) == 0 {
		return fmt.Errorf("no rank 0 step lines from step %d on", steadyFrom)
	}
	res.firstStep = t.first.Sub(t.started)
	res.stepTime = time.Duration(median(times) * float64(time.Second))
	res.steps = len(times)
	return nil
}

// tail returns the last n bytes of a file on one line, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.Join(strings.Fields(string(b)), " ")
}
