// Command resize measures how long an elastic gang takes to train again after it changes
// size, and how many steps the change loses, against a full restart of the gang at the
// same size.
//
// Each trial runs bench/resize/train.py (real DDP, gloo) under `trainyard run` on this
// machine, a step every -step, a checkpoint every -every steps. Once rank 0 reached step
// -at with 3 workers, the event of the trial's mode happens:
//
//   - lost: `--workers 2:3 --max-restarts 1`; worker 2's machine is lost: the benchmark
//     creates the file that makes rank 2 exit at once from then on, and SIGKILLs rank 2.
//     The gang restarts (its one restart), rank 2 fails again, and trainyard drops it: the
//     gang trains again with 2 workers.
//   - shrink: `--workers 2:3`; the job server's shrink for a job of higher priority: a
//     resize request for 2 workers (TRAINYARD_RESIZE_FILE, as the server writes it); the
//     ranks get the preemption notice, save, and the gang restarts with 2.
//   - restart: `--workers 3 --max-restarts 1`; rank 2 is SIGKILLed and comes back: the
//     whole gang restarts at the same size, as torchrun does on every membership change.
//   - torchrun: the peer, torchrun's elastic agents. Three `torchrun --nnodes 2:3
//     --nproc_per_node 1 --rdzv_backend c10d` agents on this machine (one per "node", the
//     first hosting the rendezvous); the third agent's node is lost: the agent and its
//     rank are SIGKILLed. The two left restart their workers and meet again as 2 (after
//     the rendezvous's last call, 30 s by default, unless -torchrun-last-call says
//     otherwise). The script keeps its own checkpoint (CKPT_DIR), as torchrun users do.
//     Room returns: a third agent starts again, and torchrun restarts every worker to
//     take it in at once, from the last checkpoint.
//
// After lost and shrink, once the gang of 2 took -at more steps, room returns: a resize
// request for 3 workers (the server's grow), applied at the next committed checkpoint.
//
// Measured: from the event to rank 0's first step in the new gang (the time to train
// again), and the steps lost: the last step rank 0 completed before the old gang stopped,
// less the step the new gang resumed from, plus one.
//
// Usage:
//
//	go run ./bench/resize [-trials 3] [-modes lost,shrink,restart] [-markdown out.md]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type config struct {
	trainyard, python, script string
	torchrun, lastCall        string
	trials, at, every         int
	step, timeout             time.Duration
	modes                     []string
	markdown                  string
}

func main() {
	var c config
	var modes string
	flag.StringVar(&c.trainyard, "trainyard", "./bin/trainyard", "the trainyard binary")
	flag.StringVar(&c.python, "python", "/usr/bin/python3", "the workers' Python, with torch")
	flag.IntVar(&c.trials, "trials", 3, "trials of each mode")
	flag.IntVar(&c.at, "at", 12, "the step rank 0 reaches before each event")
	flag.IntVar(&c.every, "every", 5, "a checkpoint every this many steps")
	flag.DurationVar(&c.step, "step", 200*time.Millisecond, "the duration of a step")
	flag.DurationVar(&c.timeout, "timeout", 2*time.Minute, "limit of each wait")
	flag.StringVar(&modes, "modes", "lost,shrink,restart", "the modes, in the order each round runs them (lost, shrink, restart, torchrun)")
	flag.StringVar(&c.torchrun, "torchrun", "/usr/bin/torchrun", "torchrun, for the torchrun mode")
	flag.StringVar(&c.lastCall, "torchrun-last-call", "", "the torchrun mode's rendezvous last_call_timeout in seconds (default: torchrun's own)")
	flag.StringVar(&c.markdown, "markdown", "", "also write the results as Markdown to this file")
	flag.Parse()
	c.modes = strings.Split(modes, ",")
	for _, m := range c.modes {
		if !slices.Contains([]string{"lost", "shrink", "restart", "torchrun"}, m) {
			fail(fmt.Errorf("-modes: unknown mode %q: want lost, shrink, restart or torchrun", m))
		}
	}
	var err error
	if c.trainyard, err = filepath.Abs(c.trainyard); err != nil {
		fail(err)
	}
	c.script, _ = filepath.Abs(filepath.Join("bench", "resize", "train.py"))
	if _, err := os.Stat(c.script); err != nil {
		fail(fmt.Errorf("run from the repository root: %w", err))
	}
	var results []result
	for round := 1; round <= c.trials; round++ {
		for _, m := range c.modes {
			r, err := runTrial(c, m)
			if err != nil {
				fail(fmt.Errorf("round %d, %s: %w", round, m, err))
			}
			r.round = round
			fmt.Println(r.line())
			results = append(results, r)
		}
	}
	md := report(c, results)
	fmt.Print("\n" + md)
	if c.markdown != "" {
		if err := os.WriteFile(c.markdown, []byte(md), 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "resize:", err)
	os.Exit(1)
}

// result is one trial's figures.
type result struct {
	mode                 string
	round                int
	again                time.Duration // event to the first step of the new gang
	lost                 int           // steps lost by the event
	growAgain            time.Duration // grow request to the first step with 3 workers
	growLost             int
	grew                 bool
	from, to, growResume int
}

func (r result) line() string {
	s := fmt.Sprintf("round %d %-8s training again after %6.2f s, %d step(s) lost", r.round, r.mode, r.again.Seconds(), r.lost)
	if r.grew {
		s += fmt.Sprintf("; grown back in %6.2f s, %d step(s) lost", r.growAgain.Seconds(), r.growLost)
	}
	return s
}

var (
	stepRe  = regexp.MustCompile(`step (\d+) world (\d+) at `)
	startRe = regexp.MustCompile(`rank 0 world (\d+) from step (\d+)`)
	pidRe   = regexp.MustCompile(`\[rank 2 pid (\d+)\]`)
)

// line is one line of trainyard's output, parsed, and when it came.
type line struct {
	at          time.Time
	step, world int // a step line of rank 0; step -1 otherwise
	start       int // a start line of rank 0: the step it resumes from; -1 otherwise
	pid2        int // rank 2's pid, from a line of its; 0 otherwise
	text        string
}

// gang is one trainyard run and its output so far.
type gang struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []line
	done  chan struct{}
}

func (g *gang) scan(r io.Reader) {
	defer close(g.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		t := sc.Text()
		l := line{at: time.Now(), step: -1, start: -1, text: t}
		if m := stepRe.FindStringSubmatch(t); m != nil {
			l.step, _ = strconv.Atoi(m[1])
			l.world, _ = strconv.Atoi(m[2])
		}
		if m := startRe.FindStringSubmatch(t); m != nil {
			l.world, _ = strconv.Atoi(m[1])
			l.start, _ = strconv.Atoi(m[2])
		}
		if m := pidRe.FindStringSubmatch(t); m != nil {
			l.pid2, _ = strconv.Atoi(m[1])
		}
		g.mu.Lock()
		g.lines = append(g.lines, l)
		if len(g.lines) > 100000 { // bounded: a trial takes far fewer
			g.lines = g.lines[1:]
		}
		g.mu.Unlock()
	}
}

// wait returns the first line from index from on that ok accepts, and its index.
func (g *gang) wait(from int, timeout time.Duration, what string, ok func(line) bool) (line, int, error) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		g.mu.Lock()
		for i := from; i < len(g.lines); i++ {
			if ok(g.lines[i]) {
				l := g.lines[i]
				g.mu.Unlock()
				return l, i, nil
			}
		}
		g.mu.Unlock()
		select {
		case <-g.done:
			return line{}, 0, fmt.Errorf("trainyard ended before %s:\n%s", what, g.tail())
		default:
		}
	}
	return line{}, 0, fmt.Errorf("no %s within %s:\n%s", what, timeout, g.tail())
}

func (g *gang) tail() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, l := range g.lines[max(0, len(g.lines)-30):] {
		out = append(out, l.text)
	}
	return strings.Join(out, "\n")
}

// lastStepBefore is the last step rank 0 printed before index i.
func (g *gang) lastStepBefore(i int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := min(i, len(g.lines)) - 1; k >= 0; k-- {
		if g.lines[k].step >= 0 {
			return g.lines[k].step
		}
	}
	return -1
}

func (g *gang) pid2() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	pid := 0
	for _, l := range g.lines {
		if l.pid2 > 0 {
			pid = l.pid2
		}
	}
	return pid
}

func (g *gang) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lines)
}

// runTrial runs one trial of the mode.
func runTrial(c config, mode string) (result, error) {
	if mode == "torchrun" {
		return runTorchrunTrial(c)
	}
	dir, err := os.MkdirTemp("", "bench-resize-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	lost, request := filepath.Join(dir, "lost"), filepath.Join(dir, "resize.json")
	workers := []string{"--workers", "2:3"}
	if mode == "restart" {
		workers = []string{"--workers", "3"}
	}
	args := append([]string{"run", "--storage-path", filepath.Join(dir, "runs"), "--name", "bench", "--max-restarts", "1",
		"--env", "STEP_S=" + strconv.FormatFloat(c.step.Seconds(), 'f', -1, 64), "--env", "CKPT_EVERY=" + strconv.Itoa(c.every),
		"--env", "LOST=" + lost}, workers...)
	args = append(args, "--", c.python, c.script)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, c.trainyard, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TRAINYARD_RESIZE_FILE="+request)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	cmd.Stderr = cmd.Stdout
	g := &gang{cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	go g.scan(out)
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	r := result{mode: mode, from: 3, to: 2}
	if mode == "restart" {
		r.to = 3
	}
	if _, _, err := g.wait(0, c.timeout, fmt.Sprintf("step %d with 3 workers", c.at), func(l line) bool {
		return l.world == 3 && l.step >= c.at
	}); err != nil {
		return r, err
	}
	mark := g.len()
	event := time.Now()
	switch mode {
	case "lost":
		if err := os.WriteFile(lost, nil, 0o644); err != nil {
			return r, err
		}
		fallthrough
	case "restart":
		pid := g.pid2()
		if pid == 0 {
			return r, errors.New("rank 2's pid not seen")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return r, fmt.Errorf("kill rank 2: %w", err)
		}
	case "shrink":
		if err := writeRequest(request, 1, 2, "bench: shrink for a job of higher priority", true); err != nil {
			return r, err
		}
	}
	again, lostSteps, last, err := trainAgain(g, mark, event, r.to, c.timeout)
	if err != nil {
		return r, err
	}
	r.again, r.lost = again, lostSteps
	if mode == "restart" {
		return r, nil
	}
	if _, _, err := g.wait(last, c.timeout, "more steps with 2 workers", func(l line) bool {
		return l.world == 2 && l.step >= c.at*2
	}); err != nil {
		return r, err
	}
	_ = os.Remove(lost)
	mark = g.len()
	grow := time.Now()
	if err := writeRequest(request, 2, 3, "bench: room returned", false); err != nil {
		return r, err
	}
	r.growAgain, r.growLost, _, err = trainAgain(g, mark, grow, 3, c.timeout)
	r.grew = err == nil
	return r, err
}

// trainAgain waits for the new gang of world workers to start (after index mark) and take
// its first step: the time since event, the steps lost, and the index of that step.
func trainAgain(g *gang, mark int, event time.Time, world int, timeout time.Duration) (time.Duration, int, int, error) {
	start, i, err := g.wait(mark, timeout, fmt.Sprintf("a gang of %d starting", world), func(l line) bool {
		return l.start >= 0 && l.world == world
	})
	if err != nil {
		return 0, 0, 0, err
	}
	first, j, err := g.wait(i, timeout, fmt.Sprintf("a first step with %d workers", world), func(l line) bool {
		return l.step >= 0 && l.world == world
	})
	if err != nil {
		return 0, 0, 0, err
	}
	last := g.lastStepBefore(i)
	return first.at.Sub(event), max(0, last-start.start+1), j, nil
}

// writeRequest writes a resize request for workers workers without GPUs, as the job
// server does (preempt.ResizeRequest).
func writeRequest(path string, seq int64, workers int, why string, now bool) error {
	gpus := make([][]int, workers)
	for i := range gpus {
		gpus[i] = []int{}
	}
	data, err := json.Marshal(map[string]any{"seq": seq, "gpus": gpus, "reason": why, "now": now})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// report writes the summary as Markdown.
func report(c config, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| mode (%d trials each) | workers | event to training again: median | min | max | steps lost: median | max | grown back to 3: median | min | max | steps lost growing |\n", c.trials)
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range c.modes {
		var again, grow []float64
		var lost, glost []int
		for _, r := range rs {
			if r.mode != m {
				continue
			}
			again, lost = append(again, r.again.Seconds()), append(lost, r.lost)
			if r.grew {
				grow, glost = append(grow, r.growAgain.Seconds()), append(glost, r.growLost)
			}
		}
		to := map[string]string{"lost": "3 → 2", "shrink": "3 → 2", "restart": "3 → 3", "torchrun": "3 → 2"}[m]
		fmt.Fprintf(&b, "| %s | %s | %.2f s | %.2f s | %.2f s | %d | %d |", m, to, median(again), slices.Min(again), slices.Max(again),
			medianInt(lost), slices.Max(lost))
		if len(grow) > 0 {
			fmt.Fprintf(&b, " %.2f s | %.2f s | %.2f s | %d |\n", median(grow), slices.Min(grow), slices.Max(grow), slices.Max(glost))
		} else {
			b.WriteString(" - | - | - | - |\n")
		}
	}
	b.WriteString("\nPer trial:\n\n| round | mode | training again | steps lost | grown back | steps lost growing |\n|---:|---|---:|---:|---:|---:|\n")
	for _, r := range rs {
		g, gl := "-", "-"
		if r.grew {
			g, gl = fmt.Sprintf("%.2f s", r.growAgain.Seconds()), strconv.Itoa(r.growLost)
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f s | %d | %s | %s |\n", r.round, r.mode, r.again.Seconds(), r.lost, g, gl)
	}
	return b.String()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func medianInt(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
