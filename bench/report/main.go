// Command report measures what trainyard.report() adds to a training step. It runs
// bench/report/steps.py through the real `trainyard run --workers 2`: the Fashion-MNIST
// MLP (784-512-512-10, batch 16 per rank, synthetic data) in DDP, in three modes that take
// turns in blocks of steps within the same processes:
//
//   - none: no report;
//   - report: report(metrics) after every step, on every rank;
//   - checkpoint: the same, with rank 0's model state_dict passed as checkpoint= every
//     -every steps (torch.save is not timed).
//
// It prints each mode's mean and median step time and the cost of one report() call as a
// percentage of the median step without report().
//
// Usage:
//
//	make build
//	go run ./bench/report -trainyard ./bin/trainyard -python /usr/bin/python3
//
// See bench/report/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/shell"
)

// config holds the command-line settings.
type config struct {
	trainyard string
	python    string
	script    string
	workers   int
	steps     int
	block     int
	every     int
	warmup    int
	settle    float64
	timeout   time.Duration
	keep      bool
	markdown  string
	root      string // temporary folder of this run
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the job, and prints the summary.
func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if err := cfg.prepare(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info := describeMachine(cfg)
	took, err := runJob(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w (files kept in %s)", err, cfg.root)
	}
	info.loadAfter, info.took = host.LoadAverage(), took
	out, err := loadRanks(filepath.Join(cfg.root, "out"), cfg.workers)
	if err != nil {
		return fmt.Errorf("%w (files kept in %s)", err, cfg.root)
	}
	text := render(info, out, checkRun(cfg, out))
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
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	cfg := &config{}
	fs.StringVar(&cfg.trainyard, "trainyard", "./bin/trainyard", "trainyard binary (built by `make build`)")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "Python with torch, for the workers")
	fs.StringVar(&cfg.script, "script", "bench/report/steps.py", "the training script")
	fs.IntVar(&cfg.workers, "workers", 2, "workers (one process each) of the run; 1 leaves this 2-core machine a core for the launcher")
	fs.IntVar(&cfg.steps, "steps", 300, "measured steps per mode")
	fs.IntVar(&cfg.block, "block", 25, "steps of one mode before the next mode takes over")
	fs.IntVar(&cfg.every, "every", 10, "checkpoint mode: a checkpoint every N of its steps")
	fs.IntVar(&cfg.warmup, "warmup", 30, "untimed steps first (reporting)")
	fs.Float64Var(&cfg.settle, "settle", 0.2, "seconds of rest between blocks (lets a background commit end)")
	fs.DurationVar(&cfg.timeout, "timeout", 170*time.Second, "limit for the whole trainyard run")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run folder and the raw times")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the summary to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 || cfg.steps < 1 || cfg.block < 1 || cfg.every < 1 || cfg.warmup < 0 || cfg.timeout <= 0 {
		return nil, errors.New("usage: report [-trainyard BIN] [-python PY] [-steps N] [-block N] [-every N]; all >= 1")
	}
	return cfg, nil
}

// prepare checks the programs and the script and makes the temporary folder.
func (c *config) prepare() error {
	for _, p := range []*string{&c.trainyard, &c.python, &c.script} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("check %s: %w", *p, err)
		}
		*p = abs
	}
	root, err := os.MkdirTemp("", "trainyard-bench-report-")
	if err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	c.root = root
	return os.Mkdir(filepath.Join(root, "out"), 0o755)
}

// cleanup removes the temporary folder unless -keep.
func (c *config) cleanup() error {
	if c.keep {
		fmt.Printf("\nfiles kept in %s\n", c.root)
		return nil
	}
	return os.RemoveAll(c.root)
}

// argv is the trainyard command line of the run.
func (c *config) argv() []string {
	return []string{c.trainyard, "run", "--workers", strconv.Itoa(c.workers),
		"--storage-path", filepath.Join(c.root, "runs"), "--name", "bench", "--",
		c.python, c.script, "--steps", strconv.Itoa(c.steps), "--block", strconv.Itoa(c.block),
		"--every", strconv.Itoa(c.every), "--warmup", strconv.Itoa(c.warmup),
		"--settle", strconv.FormatFloat(c.settle, 'f', -1, 64), "--out", filepath.Join(c.root, "out")}
}

// runJob runs trainyard with its output in the temporary folder, and returns how long it
// took. On failure the error holds the end of its output.
func runJob(ctx context.Context, cfg *config) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	logPath := filepath.Join(cfg.root, "trainyard.log")
	log, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	argv := cfg.argv()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	fmt.Printf("running: %s\n", shell.Join(argv))
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("trainyard run: %w; the end of its output:\n%s", err, tail(logPath, 2000))
	}
	return time.Since(start), nil
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data[max(0, len(data)-n):])
}
