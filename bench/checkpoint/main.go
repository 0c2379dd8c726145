// Command checkpoint benchmarks internal/checkpoint's commit against `cp -r`.
//
// For each size it makes a checkpoint folder of that size (4 files) and times:
//
//   - rename: the commit of a folder on the run folder's filesystem: the time until Take
//     returns (what training waits for) and the whole commit (read, CRC-32C and fsync of
//     every file, manifest, rename);
//   - copy: the commit of a folder on -scratch (tmpfs), which copies it to the disk;
//   - cp: `cp -r` of the same folder from -scratch to the same disk folder, alone and
//     followed by `sync -f` (the commit fsyncs, so cp+sync is the fair yardstick).
//
// The methods alternate within each round; the report gives medians and the copy path's
// throughput relative to cp.
//
// Usage:
//
//	go run ./bench/checkpoint [-sizes 1MB,10MB,100MB,1GB] [-rounds 3] [-scratch /dev/shm] [-markdown out.md]
//
// See bench/checkpoint/README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// config holds the command-line settings of a benchmark run.
type config struct {
	sizes    []int64 // checkpoint sizes in bytes
	rounds   int     // measured rounds per size
	warmup   int     // unmeasured rounds of the largest size first
	files    int     // files per checkpoint
	scratch  string  // tmpfs folder for copy-path and cp sources
	disk     string  // parent of the run folders (a disk filesystem)
	markdown string  // optional Markdown output file
	root     string  // this run's folder under disk
	shm      string  // this run's folder under scratch
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/checkpoint:", err)
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
	info := describeMachine(cfg)
	fmt.Print(info.header())
	results, err := runRounds(cfg)
	if err != nil {
		return err
	}
	report := renderReport(info, summarize(cfg, results))
	fmt.Println()
	fmt.Print(report)
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write markdown summary: %w", err)
		}
	}
	return nil
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	cfg := &config{}
	sizes := fs.String("sizes", "1MB,10MB,100MB,1GB", "checkpoint sizes (KB, MB, GB = powers of 1000; KiB, MiB, GiB of 1024)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "measured rounds per size")
	fs.IntVar(&cfg.warmup, "warmup", 1, "unmeasured rounds of the largest size first (the VM's memory and the disk warm up)")
	fs.IntVar(&cfg.files, "files", 4, "files per checkpoint")
	fs.StringVar(&cfg.scratch, "scratch", "/dev/shm", "folder on another filesystem (tmpfs) for the copy path's sources")
	fs.StringVar(&cfg.disk, "dir", os.TempDir(), "folder on the disk for run folders and the rename path's sources")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the summary as Markdown to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 || cfg.rounds < 1 || cfg.warmup < 0 || cfg.files < 1 {
		return nil, errors.New("usage: checkpoint [-sizes 1MB,10MB] [-rounds N] [-scratch DIR] [-markdown FILE]")
	}
	return cfg, nil
}

// parseSizes reads a comma-separated list of sizes such as "10MB,1GiB".
func parseSizes(s string) ([]int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		for _, u := range units {
			if strings.HasSuffix(f, u.suffix) {
				f, mult = strings.TrimSuffix(f, u.suffix), u.mult
				break
			}
		}
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sizes: %q is not a size like 10MB", f)
		}
		out = append(out, int64(n*float64(mult)))
	}
	return out, nil
}

// prepare creates this run's folders on the disk and on scratch, which must be different
// filesystems.
func (c *config) prepare() error {
	var err error
	if c.root, err = os.MkdirTemp(c.disk, "trainyard-bench-checkpoint-"); err != nil {
		return fmt.Errorf("create disk folder: %w", err)
	}
	if c.shm, err = os.MkdirTemp(c.scratch, "trainyard-bench-checkpoint-"); err != nil {
		return fmt.Errorf("create scratch folder: %w", err)
	}
	if same, err := sameFilesystem(c.root, c.shm); err != nil || same {
		return fmt.Errorf("-scratch %s must be on another filesystem than -dir %s (%v)", c.scratch, c.disk, err)
	}
	return nil
}

// cleanup removes this run's folders.
func (c *config) cleanup() {
	for _, d := range []string{c.root, c.shm} {
		if d != "" {
			if err := os.RemoveAll(d); err != nil {
				fmt.Fprintf(os.Stderr, "bench/checkpoint: remove %s: %v\n", d, err)
			}
		}
	}
}

// runRounds runs the warm-up rounds and the measured rounds of every size, printing each
// trial as it ends. Within a round the methods' order rotates.
func runRounds(cfg *config) ([]result, error) {
	largest := slices.Max(cfg.sizes)
	for w := 1; w <= cfg.warmup; w++ {
		for _, m := range methods {
			res, err := runTrial(cfg, m, largest)
			if err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
			fmt.Printf("warm-up %d  %s\n", w, res.line())
		}
	}
	var out []result
	for _, size := range cfg.sizes {
		for r := 0; r < cfg.rounds; r++ {
			for i := range methods {
				m := methods[(i+r)%len(methods)]
				res, err := runTrial(cfg, m, size)
				if err != nil {
					return nil, err
				}
				res.round = r + 1
				fmt.Printf("round %d/%d  %s\n", r+1, cfg.rounds, res.line())
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// trialDir returns a fresh folder under parent for one trial.
func trialDir(parent, prefix string) (string, error) {
	d, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", fmt.Errorf("create trial folder: %w", err)
	}
	return filepath.Clean(d), nil
}
