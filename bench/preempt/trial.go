package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// result is one trial: one mode, with one round's SIGTERM delay.
type result struct {
	mode        string
	round       int
	delay       time.Duration // SIGTERM this long after rank 0's first step
	reached     int           // the last step rank 0 completed before the gang stopped
	saved       int           // the step of the latest committed checkpoint; 0 when none
	checkpoint  string        // that checkpoint's folder name; "" when none
	afterNotice bool          // trainyard said a checkpoint was committed after the notice
	stop        time.Duration // from SIGTERM to trainyard's exit
	exitCode    int           // trainyard's; -1 until it exited
	rate        float64       // rank 0's steps per second, from its first step to SIGTERM
	dir         string        // the trial's folder (kept when the trial failed)
	err         error
}

// lost is the steps a restart from the latest checkpoint takes again.
func (r result) lost() int { return r.reached - r.saved }

// line is the trial's one-line summary, printed as it ends.
func (r result) line() string {
	if r.err != nil {
		return fmt.Sprintf("%-9s FAILED: %v (folder %s)", r.mode, r.err, r.dir)
	}
	ckpt := "no checkpoint"
	if r.checkpoint != "" {
		ckpt = r.checkpoint
		if r.afterNotice {
			ckpt += ", after the notice"
		}
	}
	return fmt.Sprintf("%-9s SIGTERM %6.3fs after step 1: reached %5d, saved %5d (%s), lost %4d; exit %d %.3fs after SIGTERM; %.1f steps/s",
		r.mode, r.delay.Seconds(), r.reached, r.saved, ckpt, r.lost(), r.exitCode, r.stop.Seconds(), r.rate)
}

// interruptedExit is trainyard run's exit code when it was preempted (interrupted).
const interruptedExit = 130

// runTrial runs one trial in a fresh folder under cfg.root, removed afterwards unless the
// trial failed or -keep was given.
func runTrial(ctx context.Context, cfg *config, m mode, round int, delay time.Duration) result {
	res := result{mode: m.name, round: round, delay: delay, exitCode: -1}
	dir, err := os.MkdirTemp(cfg.root, fmt.Sprintf("round%02d-%s-", round, m.name))
	if err != nil {
		res.err = fmt.Errorf("create trial folder: %w", err)
		return res
	}
	res.dir = dir
	res.err = measure(ctx, cfg, m, dir, &res)
	if res.err == nil && !cfg.keep {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench/preempt: remove %s: %v\n", dir, err)
		}
	}
	return res
}

// measure starts the gang, sends trainyard SIGTERM res.delay after rank 0's first step,
// waits for its exit and reads what was reached and what was saved.
func measure(ctx context.Context, cfg *config, m mode, dir string, res *result) error {
	storage := filepath.Join(dir, "storage")
	progress := filepath.Join(dir, "progress")
	logPath := filepath.Join(dir, "trainyard.log")
	name := "preempt-" + m.name
	t, err := startTrainyard(trainyardArgv(cfg, m, storage, name, progress), dir, logPath)
	if err != nil {
		return err
	}
	defer t.kill()
	first, p0, err := t.waitFirstStep(ctx, progress, cfg.timeout)
	if err != nil {
		return fmt.Errorf("%w; trainyard's output ends: %s", err, tail(logPath, 600))
	}
	select {
	case e := <-t.exited:
		t.exit = &e
		return fmt.Errorf("trainyard exited (code %d) before SIGTERM; its output ends: %s", e.code, tail(logPath, 600))
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(first.Add(res.delay))):
	}
	p1, _ := readProgress(progress)
	sigAt := time.Now()
	res.rate = float64(p1-p0) / sigAt.Sub(first).Seconds()
	if err := t.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("send SIGTERM to trainyard: %w", err)
	}
	e, err := t.wait(ctx, cfg.timeout)
	if err != nil {
		return fmt.Errorf("%w; trainyard's output ends: %s", err, tail(logPath, 600))
	}
	res.stop, res.exitCode = e.at.Sub(sigAt), e.code
	if res.reached, err = readProgress(progress); err != nil {
		return err
	}
	if res.checkpoint, res.saved, err = latestCheckpoint(filepath.Join(storage, name)); err != nil {
		return err
	}
	out, _ := os.ReadFile(logPath)
	res.afterNotice = strings.Contains(string(out), "committed after the preemption notice")
	switch {
	case res.exitCode != interruptedExit:
		return fmt.Errorf("trainyard exited %d, want %d; its output ends: %s", res.exitCode, interruptedExit, tail(logPath, 600))
	case res.lost() < 0:
		return fmt.Errorf("checkpoint %s holds step %d, after the last step rank 0 completed (%d)", res.checkpoint, res.saved, res.reached)
	}
	return nil
}

// trainyardArgv is the command line of one trial.
func trainyardArgv(cfg *config, m mode, storage, name, progress string) []string {
	grace := cfg.grace
	if m.noNotice {
		grace = noNoticeGrace
	}
	argv := []string{cfg.trainyard, "run", "--workers", "2", "--grace-period", grace.String(),
		"--storage-path", storage, "--name", name, "--",
		cfg.python, cfg.script, "--steps", strconv.Itoa(cfg.steps),
		"--step-ms", strconv.FormatFloat(float64(cfg.step)/float64(time.Millisecond), 'f', -1, 64),
		"--every", strconv.Itoa(cfg.every), "--progress", progress}
	if m.check {
		argv = append(argv, "--check-notice")
	}
	return argv
}

// exitInfo is how and when trainyard exited.
type exitInfo struct {
	at   time.Time
	code int
	err  error
}

// trainyardProc is one trial's trainyard run.
type trainyardProc struct {
	cmd    *exec.Cmd
	exited chan exitInfo // receives the exit once
	exit   *exitInfo     // the exit, once received
}

// startTrainyard starts argv in dir, in a process group of its own (so that a terminal's
// signals reach only the benchmark), with stdout and stderr in logPath.
func startTrainyard(argv []string, dir, logPath string) (*trainyardProc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create trainyard's log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start trainyard: %w", err)
	}
	t := &trainyardProc{cmd: cmd, exited: make(chan exitInfo, 1)}
	go func() {
		err := cmd.Wait()
		e := exitInfo{at: time.Now(), code: cmd.ProcessState.ExitCode()}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			e.err = err
		}
		t.exited <- e
	}()
	return t, nil
}

// waitFirstStep polls the progress file until rank 0 has completed a step, and returns
// when it saw it and the step it read.
func (t *trainyardProc) waitFirstStep(ctx context.Context, progress string, timeout time.Duration) (time.Time, int, error) {
	limit := time.After(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case e := <-t.exited:
			t.exit = &e
			return time.Time{}, 0, fmt.Errorf("trainyard exited (code %d) before rank 0's first step", e.code)
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		case <-limit:
			return time.Time{}, 0, fmt.Errorf("rank 0 took no step within %s", timeout)
		case <-tick.C:
			if step, err := readProgress(progress); err == nil && step >= 1 {
				return time.Now(), step, nil
			}
		}
	}
}

// wait waits for trainyard's exit.
func (t *trainyardProc) wait(ctx context.Context, timeout time.Duration) (exitInfo, error) {
	select {
	case e := <-t.exited:
		t.exit = &e
		if e.err != nil {
			return e, fmt.Errorf("wait for trainyard: %w", e.err)
		}
		return e, nil
	case <-ctx.Done():
		return exitInfo{}, ctx.Err()
	case <-time.After(timeout):
		return exitInfo{}, fmt.Errorf("trainyard did not exit within %s of SIGTERM", timeout)
	}
}

// kill sends SIGKILL to trainyard if it has not exited yet (its workers die with it:
// trainyard starts them with a parent-death signal), and reaps it.
func (t *trainyardProc) kill() {
	if t.exit != nil {
		return
	}
	_ = t.cmd.Process.Kill() // a pidfd in Go 1.23+: never another process
	select {
	case e := <-t.exited:
		t.exit = &e
	case <-time.After(5 * time.Second):
	}
}

// readProgress reads the step rank 0 last completed from the progress file.
func readProgress(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read progress: %w", err)
	}
	return parseStep(data)
}

// parseStep reads a step number written by steps.py: digits, padded with spaces, and a
// newline.
func parseStep(data []byte) (int, error) {
	s := strings.TrimSpace(string(data))
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a step number: %q", s)
	}
	return n, nil
}

// checkpointName matches a committed checkpoint's folder.
var checkpointName = regexp.MustCompile(`^checkpoint_([0-9]+)$`)

// latestCheckpoint returns the name of the highest-numbered committed checkpoint in the
// run folder and the step saved in it; "" and 0 when there is none.
func latestCheckpoint(runDir string) (string, int, error) {
	entries, err := os.ReadDir(runDir)
	if err != nil {
		return "", 0, fmt.Errorf("read the run folder: %w", err)
	}
	best, bestN := "", -1
	for _, e := range entries {
		m := checkpointName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n > bestN {
			best, bestN = e.Name(), n
		}
	}
	if best == "" {
		return "", 0, nil
	}
	data, err := os.ReadFile(filepath.Join(runDir, best, "step"))
	if err != nil {
		return best, 0, fmt.Errorf("read %s: %w", best, err)
	}
	step, err := parseStep(data)
	if err != nil {
		return best, 0, fmt.Errorf("%s: %w", best, err)
	}
	return best, step, nil
}

// tail returns up to the last n bytes of a file, on one line.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", " | ")
}
