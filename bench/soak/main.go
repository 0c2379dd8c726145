// Command soak measures the memory of `trainyard run` under a job that runs for a long
// time: it runs bench/soak/worker.py (one rank, standard library only) through the real
// binary, which makes -reports calls of trainyard.report() (1,000,000 by default), then
// writes -bytes of output without a newline (1 GiB by default: half a progress bar
// redrawn with carriage returns, half one line with no separator at all). It samples the
// launcher's VmRSS and VmHWM from /proc all along and prints them before, during and after
// each phase.
//
// With -baseline it runs a second binary (an older build, say) the same way, in the same
// run, and prints both side by side.
//
// Usage:
//
//	CGO_ENABLED=0 go build -o /tmp/trainyard ./cmd/trainyard
//	go run ./bench/soak -trainyard /tmp/trainyard [-baseline /tmp/trainyard-old]
//
// See bench/soak/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// config holds the command-line settings.
type config struct {
	trainyard string
	baseline  string
	python    string
	script    string
	reports   int
	bytes     int64
	settle    time.Duration
	every     time.Duration
	timeout   time.Duration
	keep      bool
	markdown  string
	root      string // temporary folder of this run
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench/soak:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the trials and prints the summary.
func run(args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	if err := cfg.prepare(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info := describeMachine(cfg)
	var trials []trial
	for _, bin := range cfg.binaries() {
		t, err := runTrial(ctx, cfg, bin)
		if err != nil {
			return fmt.Errorf("%s: %w (files kept in %s)", bin.label, err, cfg.root)
		}
		fmt.Println(t.line())
		trials = append(trials, t)
	}
	info.loadAfter = loadAverage()
	text := render(info, trials)
	fmt.Print(text)
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", cfg.markdown, err)
		}
	}
	return cfg.cleanup()
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	cfg := &config{}
	fs.StringVar(&cfg.trainyard, "trainyard", "./bin/trainyard", "the trainyard binary")
	fs.StringVar(&cfg.baseline, "baseline", "", "a second trainyard binary (an older build) run the same way, for comparison")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "interpreter for the worker (standard library only)")
	fs.StringVar(&cfg.script, "script", "bench/soak/worker.py", "the worker script")
	fs.IntVar(&cfg.reports, "reports", 1_000_000, "trainyard.report() calls")
	fs.Int64Var(&cfg.bytes, "bytes", 1<<30, "bytes of output without a newline")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "rest around each phase, to read the idle launcher's memory")
	fs.DurationVar(&cfg.every, "every", 100*time.Millisecond, "how often the launcher's memory is read")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "limit for one trainyard run")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run folders")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the summary to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 || cfg.reports < 0 || cfg.bytes < 0 || cfg.settle < 0 || cfg.every <= 0 || cfg.timeout <= 0 {
		return nil, errors.New("usage: soak [-trainyard BIN] [-baseline BIN] [-reports N] [-bytes N]; counts >= 0")
	}
	return cfg, nil
}

// prepare checks the programs and the script and makes the temporary folder.
func (c *config) prepare() error {
	paths := []*string{&c.trainyard, &c.python, &c.script}
	if c.baseline != "" {
		paths = append(paths, &c.baseline)
	}
	for _, p := range paths {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("check %s: %w", *p, err)
		}
		*p = abs
	}
	root, err := os.MkdirTemp("", "trainyard-bench-soak-")
	if err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	c.root = root
	return nil
}

// binary is a trainyard binary to measure.
type binary struct {
	label string // "trainyard", "baseline"
	path  string
}

// binaries lists the binaries to run, the one under test first.
func (c *config) binaries() []binary {
	out := []binary{{label: "trainyard", path: c.trainyard}}
	if c.baseline != "" {
		out = append(out, binary{label: "baseline", path: c.baseline})
	}
	return out
}

// cleanup removes the temporary folder unless -keep.
func (c *config) cleanup() error {
	if c.keep {
		fmt.Printf("\nfiles kept in %s\n", c.root)
		return nil
	}
	return os.RemoveAll(c.root)
}
