// Command launch benchmarks `trainyard run` against torchrun on the Fashion-MNIST DDP
// example with 2 ranks on this machine, alternating the two launchers in every round.
//
// It measures, for each launcher:
//
//   - launch to first step: from starting the launcher to the first "first step done"
//     line on its stdout;
//   - steady-state step time: the median of rank 0's "step N time X" values, N >= 20;
//   - SIGKILL to restarted first step: with one restart allowed, rank 1 is killed once
//     rank 0 logged step 30, and the time to the restarted gang's first step is taken.
//
// Usage:
//
//	go run ./bench/launch -trainyard ./bin/trainyard -python /usr/bin/python3 [-rounds 5]
//
// See bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/shell"
)

// config holds the command-line settings of a benchmark run.
type config struct {
	trainyardArg string        // -trainyard as given
	trainyard    string        // the snapshot of it that the trials run
	python       string        // interpreter for trainyard's workers
	torchrun     string        // torchrun entry point
	scriptArg    string        // -script as given
	script       string        // absolute path of train.py
	rounds       int           // measured rounds
	warmup       int           // unmeasured rounds before them
	timeout      time.Duration // limit for one trial
	markdown     string        // optional Markdown output file
	keep         bool          // keep every trial's folder
	kinds        []trialKind   // the trial kinds of each measured round (-kinds)
	rdzv         string        // torchrun's rendezvous: "static" or "c10d" (-torchrun-rdzv)
	server       bool          // also submit plain runs to a trainyard server --prestart (-server)
	bare         bool          // also start plain runs' ranks with no launcher (-bare)
	self         string        // this program, which -bare runs as the bare launcher
	serverURL    string        // that server's address, once started
	root         string        // temporary folder of this run
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == bareCommand {
		os.Exit(runBare(os.Args[2:], os.Stdout, os.Stderr))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/launch:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the benchmark and reports it.
func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cfg.prepare(); err != nil {
		return err
	}
	defer cfg.cleanup()
	var (
		srv    *benchServer
		failed = true // until the trials are summed up: keep the server's folder
	)
	if cfg.server {
		if srv, err = startServer(ctx, cfg); err != nil {
			return err
		}
		defer func() { srv.stop(cfg.keep || failed) }()
	}
	info := describeMachine(ctx, cfg)
	printHeader(os.Stdout, info)
	results := runRounds(ctx, cfg, srv)
	info.loadEnd = host.LoadAverage()
	sum := summarize(results, cfg.rounds)
	failed = len(sum.failures) > 0
	report := renderReport(info, sum, results)
	fmt.Println()
	fmt.Print(report)
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write markdown summary: %w", err)
		}
	}
	return sum.failureError()
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	cfg := &config{}
	fs.StringVar(&cfg.trainyardArg, "trainyard", "./bin/trainyard", "trainyard binary (built by `make build`)")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "Python with torch, for trainyard's workers")
	fs.StringVar(&cfg.torchrun, "torchrun", "/usr/bin/torchrun", "torchrun entry point")
	fs.StringVar(&cfg.scriptArg, "script", "examples/fashion-mnist/train.py", "training script")
	fs.IntVar(&cfg.rounds, "rounds", 5, "measured rounds (each runs both launchers, both trial kinds)")
	fs.IntVar(&cfg.warmup, "warmup", 1, "unmeasured warm-up rounds of plain runs before the measured ones")
	fs.DurationVar(&cfg.timeout, "timeout", 120*time.Second, "limit for one trial")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the summary as Markdown to this file")
	fs.BoolVar(&cfg.keep, "keep", false, "keep every trial's folder (failed trials' folders are always kept)")
	kinds := fs.String("kinds", "run,restart", "the trial kinds of each round: run, restart or both")
	fs.StringVar(&cfg.rdzv, "torchrun-rdzv", "static", "torchrun's rendezvous: static (--master_port) or c10d (--rdzv-backend c10d)")
	fs.BoolVar(&cfg.server, "server", false, "also submit each plain run to a `trainyard server --prestart` that the benchmark starts")
	fs.BoolVar(&cfg.bare, "bare", false, "also start each plain run's ranks with no launcher (the floor: the ranks' own start)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 || cfg.rounds < 1 || cfg.warmup < 0 || cfg.timeout <= 0 {
		return nil, errors.New("usage: launch [-trainyard BIN] [-python PY] [-rounds N] [-markdown FILE]; rounds >= 1")
	}
	if cfg.rdzv != "static" && cfg.rdzv != "c10d" {
		return nil, fmt.Errorf("-torchrun-rdzv %q: give static or c10d", cfg.rdzv)
	}
	var err error
	if cfg.kinds, err = parseKinds(*kinds); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseKinds reads -kinds: trial kinds by name, separated by commas.
func parseKinds(s string) ([]trialKind, error) {
	var out []trialKind
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case plainRun.String():
			out = append(out, plainRun)
		case restartRun.String():
			out = append(out, restartRun)
		default:
			return nil, fmt.Errorf("-kinds %q: give run, restart or run,restart", s)
		}
	}
	return out, nil
}

// prepare checks the programs, resolves the script and snapshots the trainyard binary
// into a fresh temporary folder, so that a rebuild during the run changes nothing.
func (c *config) prepare() error {
	for _, p := range []string{c.trainyardArg, c.python, c.torchrun} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("check program: %w", err)
		}
	}
	script, err := filepath.Abs(c.scriptArg)
	if err != nil {
		return fmt.Errorf("resolve script: %w", err)
	}
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("check script: %w", err)
	}
	c.script = script
	if c.self, err = os.Executable(); err != nil {
		return fmt.Errorf("find this program: %w", err)
	}
	if c.root, err = os.MkdirTemp("", "trainyard-bench-"); err != nil {
		return fmt.Errorf("create temporary folder: %w", err)
	}
	c.trainyard = filepath.Join(c.root, "trainyard")
	return copyExecutable(c.trainyardArg, c.trainyard)
}

// env is the environment of both launchers: the script imports the trainyard helper
// module, which trainyard run provides and torchrun does not, so both get the repository's
// python/ folder on PYTHONPATH (trainyard appends its own copy of the same module after it).
// Both train on the CPU with gloo: trainyard's workers get no GPU unless asked, and
// CUDA_VISIBLE_DEVICES= does the same for torchrun's (on a one-GPU machine its second rank
// would otherwise ask for cuda:1).
func (c *config) env() []string {
	helper := filepath.Join(filepath.Dir(c.script), "..", "..", "python")
	return append(os.Environ(), "PYTHONPATH="+filepath.Clean(helper), "CUDA_VISIBLE_DEVICES=",
		"TRAINYARD_TOKEN_FILE="+filepath.Join(c.root, "server", "token"))
}

// cleanup removes the binary snapshot and the temporary folder if nothing was kept in it.
func (c *config) cleanup() {
	_ = os.Remove(c.trainyard)
	if err := os.Remove(c.root); err != nil {
		fmt.Fprintf(os.Stderr, "bench/launch: trial folders kept in %s\n", c.root)
	}
}

// copyExecutable copies the file src to dst with mode 0755.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	return nil
}

// runRounds runs the warm-up rounds, then the measured rounds, printing every trial as
// it ends. In each round the launchers alternate: trainyard, torchrun (and the server,
// with -server) for a plain run, then trainyard, torchrun for a restart trial. An
// interruption stops it early.
func runRounds(ctx context.Context, cfg *config, srv *benchServer) []trialResult {
	for w := 1; w <= cfg.warmup; w++ {
		for _, l := range cfg.launchersFor(plainRun) {
			if ctx.Err() != nil {
				return nil
			}
			res := runServerAware(ctx, cfg, srv, trialSpec{launcher: l, kind: plainRun, round: -w})
			fmt.Printf("warm-up %d  %s\n", w, res.line())
		}
	}
	var out []trialResult
	for r := 1; r <= cfg.rounds; r++ {
		for _, k := range cfg.kinds {
			for _, l := range cfg.launchersFor(k) {
				if ctx.Err() != nil {
					return out
				}
				res := runServerAware(ctx, cfg, srv, trialSpec{launcher: l, kind: k, round: r})
				fmt.Printf("round %d/%d  %s\n", r, cfg.rounds, res.line())
				out = append(out, res)
			}
		}
	}
	return out
}

// runServerAware runs a trial; after a server trial it waits for the server's standby.
func runServerAware(ctx context.Context, cfg *config, srv *benchServer, spec trialSpec) trialResult {
	res := runTrial(ctx, cfg, spec)
	if srv != nil && spec.launcher.name == serverLauncher.name {
		if err := srv.waitStandby(ctx, 2*time.Minute); err != nil {
			fmt.Printf("  (%v)\n", err)
		}
	}
	return res
}

// commandLine is the command that started this program, as `go run` would take it.
func commandLine() string {
	parts := []string{"go", "run", "./bench/launch"}
	for _, a := range os.Args[1:] {
		parts = append(parts, shell.Quote(a))
	}
	return strings.Join(parts, " ")
}
