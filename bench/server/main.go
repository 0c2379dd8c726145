// Command server benchmarks `trainyard server` on this machine, through the Go client
// and plain HTTP on loopback:
//
//   - submit to running: on an idle server, jobs of `sleep 1` submitted one at a time,
//     each followed until it runs and until it ends; the time from submission to RUNNING
//     as the job's record says and as a polling client sees it, and to the supervisor's
//     first console line, against the time `trainyard run -- sleep 1` takes to print its
//     first line when started by hand;
//   - submissions per second: concurrent clients submit jobs that queue behind a job
//     holding every CPU, against the store's own Create rate for the same records;
//   - memory: the server's RSS while it keeps 10,000 finished jobs (written into its
//     state file beforehand) and 1,000 queued ones, after it listed them all and
//     answered a few /metrics scrapes, and the state file's size.
//
// Usage:
//
//	go run ./bench/server -trainyard ./bin/trainyard [-markdown out.md]
//
// See bench/server/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// config holds the command-line settings of a benchmark run.
type config struct {
	trainyard   string        // the binary under test
	runs        int           // submit-to-running trials
	poll        time.Duration // how often a trial polls the job
	clients     int           // concurrent submitters
	submissions int           // jobs submitted (and store records created) for the rate
	finished    int           // finished jobs written into the memory trial's state file
	queued      int           // jobs queued over HTTP in the memory trial
	timeout     time.Duration // limit for the whole run
	dir         string        // parent of this run's folder
	markdown    string        // optional Markdown output file
	keep        bool          // keep this run's folder
	root        string        // this run's folder under dir
	binary      string        // the copy of trainyard under root
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/server:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the three trials and prints the report.
func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if err := cfg.prepare(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	info := describeMachine(ctx, cfg)
	res, err := measureAll(ctx, cfg)
	if err != nil {
		cfg.keep = true
		fmt.Fprintf(os.Stderr, "bench/server: keeping %s (server logs under it)\n", cfg.root)
		return err
	}
	cfg.cleanup()
	info.loadAfter = host.LoadAverage()
	report := renderReport(cfg, info, res)
	fmt.Println()
	fmt.Print(report)
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write markdown summary: %w", err)
		}
	}
	return nil
}

// results are what the three trials measured.
type results struct {
	latency []latencyTrial
	http    rate
	store   rate
	drain   rate
	memory  memoryResult
}

// measureAll runs the trials one after the other, each on a server of its own.
func measureAll(ctx context.Context, cfg *config) (results, error) {
	var res results
	var err error
	progress("submit to running: %d jobs of `sleep 1`, one at a time, alternating with `trainyard run -- sleep 1`", cfg.runs)
	if res.latency, err = measureLatency(ctx, cfg); err != nil {
		return res, fmt.Errorf("submit to running: %w", err)
	}
	progress("submissions: %d jobs from %d clients behind a blocker; then %d store.Create calls", cfg.submissions, cfg.clients, cfg.submissions)
	if res.http, res.drain, err = measureSubmissions(ctx, cfg); err != nil {
		return res, fmt.Errorf("submissions: %w", err)
	}
	if res.store, err = measureStoreCreates(cfg); err != nil {
		return res, fmt.Errorf("store creates: %w", err)
	}
	progress("memory: %d finished jobs in the state file, then %d queued over HTTP", cfg.finished, cfg.queued)
	if res.memory, err = measureMemory(ctx, cfg); err != nil {
		return res, fmt.Errorf("memory: %w", err)
	}
	return res, nil
}

// progress prints a line about what the benchmark does now, on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	cfg := &config{}
	fs.StringVar(&cfg.trainyard, "trainyard", "./bin/trainyard", "trainyard binary (copied into the run's folder at start)")
	fs.IntVar(&cfg.runs, "runs", 20, "submit-to-running trials, each also timing `trainyard run -- sleep 1` once")
	fs.DurationVar(&cfg.poll, "poll", 5*time.Millisecond, "how often a submit-to-running trial polls the job")
	fs.IntVar(&cfg.clients, "clients", 50, "concurrent clients that submit (and goroutines that call store.Create)")
	fs.IntVar(&cfg.submissions, "submissions", 2000, "jobs submitted for the submission rate, and records created for the store's rate")
	fs.IntVar(&cfg.finished, "finished", 10000, "finished jobs written into the memory trial's state file")
	fs.IntVar(&cfg.queued, "queued", 1000, "jobs queued over HTTP in the memory trial")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "limit for the whole run")
	fs.StringVar(&cfg.dir, "dir", os.TempDir(), "folder for the run's state folders, storage paths and server logs")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the summary as Markdown to this file")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run's folder (it is always kept after a failure)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 || cfg.runs < 1 || cfg.poll <= 0 || cfg.clients < 1 || cfg.submissions < 1 ||
		cfg.finished < 0 || cfg.queued < 1 || cfg.timeout <= 0 {
		return nil, errors.New("usage: server [-trainyard BIN] [-runs N] [-clients N] [-submissions N] [-finished N] [-queued N] [-markdown FILE]")
	}
	return cfg, nil
}

// prepare creates this run's folder and copies the binary into it, so that a rebuild
// during the run changes nothing.
func (c *config) prepare() error {
	root, err := os.MkdirTemp(c.dir, "trainyard-bench-server-")
	if err != nil {
		return fmt.Errorf("create the run's folder: %w", err)
	}
	c.root, c.binary = root, filepath.Join(root, "trainyard")
	if err := host.CopyFile(c.trainyard, c.binary, 0o755); err != nil {
		return fmt.Errorf("-trainyard: %w", err)
	}
	return nil
}

// cleanup removes this run's folder unless it is to be kept.
func (c *config) cleanup() {
	if !c.keep {
		_ = os.RemoveAll(c.root)
	}
}
