// Command dashboard benchmarks the web dashboard of `trainyard server` on a server that
// holds many jobs, through plain HTTP and in Debian's headless Chromium:
//
//   - the job list with 10,000 jobs: the server's time per page (first, a middle one,
//     a search), against the native API's page of the same jobs alone;
//   - a job whose console log has 1,000,000 lines: the server's time for its page, and
//     in Chromium the time to a loaded page and the page's JavaScript heap, against
//     opening the whole log as text;
//   - a curve of 100,000 reported results: the time from navigation to the curves drawn
//     in Chromium with every point (?points=100000), against the default 5,000.
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
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if cfg.jobs < 1 || cfg.logLines < 1 || cfg.points < 2 || cfg.repeat < 1 {
		return fmt.Errorf("-jobs, -log-lines, -repeat must be 1 or more and -points 2 or more")
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
	if rep.server, err = measureServer(ctx, s, big, cfg); err != nil {
		return err
	}
	if rep.browser, err = measureBrowser(ctx, s, big, cfg); err != nil {
		return err
	}
	return rep.print(os.Stdout, cfg.markdown)
}
