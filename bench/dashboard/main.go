// Command dashboard benchmarks the web dashboard of `trainyard server` on a server that
// holds many jobs, through plain HTTP and in Debian's headless Chromium:
//
//   - the job list with 10,000 jobs: the server's time per page (first, a middle one,
//     a search), against the native API's page of the same jobs alone;
//   - a job whose console log has 1,000,000 lines: the server's time for its page, and
//     in Chromium the time to a loaded page and the page's JavaScript heap, against
//     opening the whole log as text;
//   - a curve of 100,000 reported results: the time from navigation to the curves drawn
//     in Chromium with every point (?points=100000), against the default 5,000;
//   - a job printing 1,000 lines a second: how far behind the printing its page's live
//     log is after 20 s in Chromium, against the same stream read without drawing.
//
// Usage:
//
//	go run ./bench/dashboard -trainyard ./bin/trainyard [-markdown out.md]
//
// See bench/dashboard/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// config holds the command-line settings of a benchmark run.
type config struct {
	trainyard string
	chromium  string
	jobs      int // finished jobs in the server's store
	logLines  int // lines of the big job's console log
	points    int // results of the big job
	repeat    int // measurements of each figure; the median is reported
	markdown  string
	keep      bool
	// liveRate and liveSeconds are the live log's job: lines a second, and how long it
	// is watched.
	liveRate, liveSeconds int
	only                  string // "live": the live log alone
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/dashboard:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg config
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.StringVar(&cfg.trainyard, "trainyard", "./bin/trainyard", "the trainyard binary under test")
	fs.StringVar(&cfg.chromium, "chromium", "/usr/bin/chromium", "the Chromium to drive")
	fs.IntVar(&cfg.jobs, "jobs", 10000, "finished jobs in the server's store")
	fs.IntVar(&cfg.logLines, "log-lines", 1000000, "lines of the big job's console log")
	fs.IntVar(&cfg.points, "points", 100000, "results the big job reported")
	fs.IntVar(&cfg.repeat, "repeat", 5, "measurements of each figure (the median is reported)")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the report as Markdown to this file")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run's folder")
	fs.IntVar(&cfg.liveRate, "live-rate", 1000, "lines a second that the live log's job prints")
	fs.IntVar(&cfg.liveSeconds, "live-seconds", 20, "how long the live log is watched")
	fs.StringVar(&cfg.only, "only", "", `"live": measure the live log alone (on a server with one job)`)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if cfg.jobs < 1 || cfg.logLines < 1 || cfg.points < 2 || cfg.repeat < 1 || cfg.liveRate < 1 || cfg.liveSeconds < 1 {
		return fmt.Errorf("-jobs, -log-lines, -repeat, -live-rate, -live-seconds must be 1 or more and -points 2 or more")
	}
	if cfg.only != "" && cfg.only != "live" {
		return fmt.Errorf(`-only %q: "live" or nothing`, cfg.only)
	}
	if cfg.only == "live" {
		cfg.jobs, cfg.logLines, cfg.points = 1, 1, 2
	}
	bin, err := filepath.Abs(cfg.trainyard)
	if err != nil {
		return err
	}
	cfg.trainyard = bin
	dir, err := os.MkdirTemp("", "bench-dashboard-")
	if err != nil {
		return err
	}
	if !cfg.keep {
		defer os.RemoveAll(dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	start := time.Now()
	big, err := seedState(dir, cfg)
	if err != nil {
		return fmt.Errorf("seed the server's state: %w", err)
	}
	seeded := time.Since(start)
	s, err := startServer(ctx, cfg.trainyard, dir)
	if err != nil {
		return err
	}
	defer s.stop()
	rep := report{cfg: cfg, seeded: seeded, machine: fmt.Sprintf("%d cores (%s), %s, %s, load %s",
		runtime.NumCPU(), host.CPU(), "Linux "+host.Kernel(), host.MemTotalGiB(), host.LoadAverage())}
	if cfg.only == "" {
		if rep.server, err = measureServer(ctx, s, big, cfg); err != nil {
			return err
		}
		if rep.browser, err = measureBrowser(ctx, s, big, cfg); err != nil {
			return err
		}
	}
	if rep.live, err = measureLive(ctx, s, cfg); err != nil {
		return err
	}
	return rep.print(os.Stdout, cfg.markdown)
}
