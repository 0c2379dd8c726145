// Command preempt measures the training steps a preemption loses, with Trainyard's
// preemption notice and without it.
//
// Each trial runs bench/preempt/steps.py (standard library only) under
// `trainyard run --workers 2`: steps of a fixed duration, a checkpoint every N steps. Once
// rank 0 has taken its first step, the benchmark waits a uniformly random time and sends
// SIGTERM to trainyard, as a spot VM's or a pod's preemption would. When trainyard has
// exited it reads the last step rank 0 completed and the step of the latest committed
// checkpoint: the difference is the steps a restart would do again. The modes:
//
//   - notice: the script checks trainyard.preemption() every step and saves at the notice;
//   - no-notice: the script never checks, and trainyard gives no notice (--grace-period 1s
//     leaves no time to save), so the ranks are stopped at once, as without the notice;
//   - unchecked: the script never checks, but it reports through the helper, so trainyard
//     still posts the notice and waits for a checkpoint reported after it: the script's
//     next periodic one.
//
// The modes rotate within each round and share the round's random delay.
//
// Usage:
//
//	go run ./bench/preempt [-trials 10] [-modes notice,no-notice,unchecked] [-seed 1] [-markdown out.md]
//
// See bench/preempt/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// config holds the command-line settings of a benchmark run.
type config struct {
	trainyardArg string        // -trainyard as given
	trainyard    string        // the snapshot of it that the trials run
	python       string        // interpreter for the workers
	script       string        // absolute path of steps.py
	trials       int           // rounds; each runs every mode once
	modes        []mode        // the modes compared
	steps        int           // steps the script would take if never stopped
	step         time.Duration // duration of one step
	every        int           // checkpoint interval in steps
	from, to     time.Duration // SIGTERM this long after rank 0's first step, uniformly
	seed         uint64        // seed of the delays
	grace        time.Duration // --grace-period of the modes that get the notice
	timeout      time.Duration // limit for each wait of a trial
	markdown     string        // optional Markdown output file
	keep         bool          // keep every trial's folder
	root         string        // temporary folder of this run
}

// mode is one way of meeting the preemption.
type mode struct {
	name  string
	check bool // the script checks trainyard.preemption() every step
	// noNotice runs trainyard with --grace-period 1s, which leaves no time to save: it
	// posts no notice and stops the ranks at once.
	noNotice bool
}

// allModes are the modes -modes may name, in their default order.
var allModes = []mode{
	{name: "notice", check: true},
	{name: "no-notice", noNotice: true},
	{name: "unchecked"},
}

// noNoticeGrace is the grace period of the no-notice mode: preempt.Deadline keeps at
// least a second for the stop, so a grace period of 1 s leaves nothing to save in.
const noNoticeGrace = time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/preempt:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the trials and prints the report.
func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if err := cfg.prepare(); err != nil {
		return err
	}
	defer cfg.cleanup()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info := describeMachine(ctx, cfg)
	fmt.Print(info.header())
	results := runRounds(ctx, cfg)
	info.loadAfter = host.LoadAverage()
	report := renderReport(info, summarize(cfg.modes, results), results)
	fmt.Println()
	fmt.Print(report)
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write markdown summary: %w", err)
		}
	}
	if n := failures(results); n > 0 || ctx.Err() != nil {
		return fmt.Errorf("%d trial(s) failed or the run was interrupted (see the report)", n)
	}
	return nil
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("preempt", flag.ContinueOnError)
	cfg := &config{}
	modes := fs.String("modes", "notice,no-notice,unchecked", "modes to compare: notice, no-notice, unchecked")
	var script string
	fs.StringVar(&cfg.trainyardArg, "trainyard", "./bin/trainyard", "trainyard binary (copied at start)")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "interpreter for the workers")
	fs.StringVar(&script, "script", "bench/preempt/steps.py", "the worker script")
	fs.IntVar(&cfg.trials, "trials", 10, "rounds; each runs every mode once")
	fs.IntVar(&cfg.steps, "steps", 100_000, "steps the script takes if never stopped")
	fs.DurationVar(&cfg.step, "step", 10*time.Millisecond, "duration of one step (a sleep)")
	fs.IntVar(&cfg.every, "every", 500, "checkpoint every this many steps")
	fs.DurationVar(&cfg.from, "from", 3*time.Second, "earliest SIGTERM after rank 0's first step")
	fs.DurationVar(&cfg.to, "to", 20*time.Second, "latest SIGTERM after rank 0's first step")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the random SIGTERM times")
	fs.DurationVar(&cfg.grace, "grace", 30*time.Second, "trainyard's --grace-period in the notice and unchecked modes")
	fs.DurationVar(&cfg.timeout, "timeout", 90*time.Second, "limit for the first step and for the exit after SIGTERM")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the report as Markdown to this file")
	fs.BoolVar(&cfg.keep, "keep", false, "keep every trial's folder (failed trials' folders are always kept)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.modes, err = parseModes(*modes); err != nil {
		return nil, err
	}
	if cfg.script, err = filepath.Abs(script); err != nil {
		return nil, fmt.Errorf("resolve -script: %w", err)
	}
	switch {
	case fs.NArg() > 0:
		return nil, errors.New("usage: preempt [-trials N] [-modes notice,no-notice,unchecked] [-seed N] [-markdown FILE]")
	case cfg.trials < 1 || cfg.steps < 1 || cfg.every < 1 || cfg.step <= 0:
		return nil, errors.New("-trials, -steps, -every and -step must be positive")
	case cfg.from <= 0 || cfg.to < cfg.from:
		return nil, fmt.Errorf("-from %s and -to %s: want 0 < from <= to", cfg.from, cfg.to)
	case cfg.grace <= 2*noNoticeGrace:
		return nil, fmt.Errorf("-grace %s leaves no time to save; give more than 2s", cfg.grace)
	}
	return cfg, nil
}

// parseModes reads a comma-separated list of mode names.
func parseModes(s string) ([]mode, error) {
	var out []mode
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := -1
		for j, m := range allModes {
			if m.name == name {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("-modes: unknown mode %q (want notice, no-notice or unchecked)", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("-modes: %q given twice", name)
		}
		seen[name] = true
		out = append(out, allModes[i])
	}
	return out, nil
}

// prepare checks the programs and the script, makes the temporary folder and copies the
// trainyard binary into it, so that a rebuild during the run changes nothing.
func (c *config) prepare() error {
	for _, p := range []string{c.trainyardArg, c.python, c.script} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("check program: %w", err)
		}
	}
	var err error
	if c.root, err = os.MkdirTemp("", "trainyard-bench-preempt-"); err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	c.trainyard = filepath.Join(c.root, "trainyard")
	if err := host.CopyFile(c.trainyardArg, c.trainyard, 0o755); err != nil {
		return fmt.Errorf("snapshot %s: %w", c.trainyardArg, err)
	}
	return nil
}

// cleanup removes the binary snapshot and the temporary folder if nothing was kept in it.
func (c *config) cleanup() {
	_ = os.Remove(c.trainyard)
	if err := os.Remove(c.root); err != nil {
		fmt.Fprintf(os.Stderr, "bench/preempt: trial folders kept in %s\n", c.root)
	}
}

// runRounds runs every round, printing each trial as it ends. A round draws one SIGTERM
// delay, uniformly in [from, to], and runs every mode with it; the modes' order rotates
// from round to round. An interruption stops it early.
func runRounds(ctx context.Context, cfg *config) []result {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x7072656d707400)) // "preempt"
	var out []result
	for r := 1; r <= cfg.trials; r++ {
		delay := cfg.from + time.Duration(rng.Float64()*float64(cfg.to-cfg.from))
		delay = delay.Round(time.Millisecond)
		for i := range cfg.modes {
			if ctx.Err() != nil {
				return out
			}
			m := cfg.modes[(i+r-1)%len(cfg.modes)]
			res := runTrial(ctx, cfg, m, r, delay)
			fmt.Printf("round %d/%d  %s\n", r, cfg.trials, res.line())
			out = append(out, res)
		}
	}
	return out
}

// failures counts the trials that went wrong.
func failures(results []result) int {
	n := 0
	for _, r := range results {
		if r.err != nil {
			n++
		}
	}
	return n
}
