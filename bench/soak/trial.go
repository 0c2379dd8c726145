package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/internal/shell"
)

// sample is the launcher's memory at one moment, in bytes.
type sample struct {
	at             time.Time
	rss, hwm, anon int64 // VmRSS, VmHWM, RssAnon (VmRSS less the binary's mapped pages)
}

// readSample reads the memory of pid from /proc/<pid>/status.
func readSample(pid int) (sample, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return sample{}, err
	}
	defer f.Close()
	s := sample{at: time.Now()}
	fields := map[string]*int64{"VmRSS": &s.rss, "VmHWM": &s.hwm, "RssAnon": &s.anon}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		if p, ok := fields[name]; ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			*p = kb << 10
		}
	}
	if s.rss == 0 {
		return s, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return s, sc.Err()
}

// trial is one binary's run of the worker.
type trial struct {
	bin     binary
	argv    []string
	took    time.Duration
	samples []sample
	phases  map[string]time.Time // the worker's marks
	results int                  // lines of result.json
	logSize int64                // bytes of rank 0's log
	check   string               // "" when the run folder holds what the worker made
}

// runTrial runs bin with the worker, sampling its memory until it exits.
func runTrial(ctx context.Context, cfg *config, bin binary) (trial, error) {
	dir := filepath.Join(cfg.root, bin.label)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return trial{}, err
	}
	t := trial{bin: bin, argv: argv(cfg, bin.path, dir)}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	stderr, err := os.Create(filepath.Join(dir, "trainyard.stderr"))
	if err != nil {
		return t, err
	}
	defer stderr.Close()
	// The console output (1 GiB of it) goes nowhere: the run's log file keeps it.
	cmd := exec.CommandContext(ctx, t.argv[0], t.argv[1:]...)
	cmd.Stdout, cmd.Stderr = nil, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	fmt.Printf("running: %s\n", shell.Join(t.argv))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return t, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.samples, err = sampleUntil(cmd.Process.Pid, cfg.every, done)
	t.took = time.Since(start)
	if err != nil {
		return t, fmt.Errorf("trainyard run: %w; the end of its stderr:\n%s", err, tail(stderr.Name(), 2000))
	}
	if t.phases, err = readPhases(filepath.Join(dir, "phases")); err != nil {
		return t, err
	}
	t.inspect(cfg, dir)
	if !cfg.keep {
		return t, os.RemoveAll(filepath.Join(dir, "runs"))
	}
	return t, nil
}

// argv is the trainyard command line of a trial.
func argv(cfg *config, trainyard, dir string) []string {
	return []string{trainyard, "run", "--storage-path", filepath.Join(dir, "runs"), "--name", "soak", "--",
		cfg.python, cfg.script, "--reports", strconv.Itoa(cfg.reports), "--bytes", strconv.FormatInt(cfg.bytes, 10),
		"--settle", strconv.FormatFloat(cfg.settle.Seconds(), 'f', -1, 64), "--phases", filepath.Join(dir, "phases")}
}

// sampleUntil reads the memory of pid every period until done says the process exited,
// and returns the samples and the exit's error.
func sampleUntil(pid int, every time.Duration, done <-chan error) ([]sample, error) {
	var out []sample
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if s, err := readSample(pid); err == nil {
			out = append(out, s)
		}
		select {
		case err := <-done:
			return out, err
		case <-tick.C:
		}
	}
}

// readPhases reads the worker's "<phase> <unix seconds>" lines.
func readPhases(path string) (map[string]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the worker's phases: %w", err)
	}
	defer f.Close()
	out := map[string]time.Time{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, at, ok := strings.Cut(sc.Text(), " ")
		secs, err := strconv.ParseFloat(at, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("read the worker's phases: bad line %q", sc.Text())
		}
		out[name] = time.Unix(0, int64(secs*1e9))
	}
	for _, p := range []string{"ready", "reports-begin", "reports-end", "output-begin", "output-end", "done"} {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("the worker never reached phase %s", p)
		}
	}
	return out, sc.Err()
}

// inspect checks that the run folder holds every report and all the output.
func (t *trial) inspect(cfg *config, dir string) {
	run := filepath.Join(dir, "runs", "soak")
	t.results = countLines(filepath.Join(run, "result.json"))
	if fi, err := os.Stat(filepath.Join(run, "logs", "attempt-1", "rank-0.log")); err == nil {
		t.logSize = fi.Size()
	}
	var problems []string
	if t.results != cfg.reports {
		problems = append(problems, fmt.Sprintf("result.json has %d results, want %d", t.results, cfg.reports))
	}
	if t.logSize < cfg.bytes {
		problems = append(problems, fmt.Sprintf("rank 0's log has %d bytes, want at least %d", t.logSize, cfg.bytes))
	}
	t.check = strings.Join(problems, "; ")
}

// countLines counts the newlines of a file; -1 when it cannot be read.
func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 1<<20)
	for {
		k, err := f.Read(buf)
		n += strings.Count(string(buf[:k]), "\n")
		if err != nil {
			return n
		}
	}
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data[max(0, len(data)-n):])
}
