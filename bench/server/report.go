package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// memoryAim is the most memory the server should need with 10,000 finished and 1,000
// queued jobs.
const memoryAim = 200e6

// machine describes where the benchmark ran.
type machine struct {
	cpus       int
	cpu        string // model name
	memory     string // MemTotal
	kernel     string
	trainyard  string // `trainyard version`
	loadBefore string
	loadAfter  string
}

// describeMachine reads the machine's CPUs, kernel, load average and trainyard version.
func describeMachine(ctx context.Context, cfg *config) machine {
	m := machine{cpus: runtime.NumCPU(), cpu: host.CPU(), kernel: "Linux " + host.Kernel(), memory: host.MemTotalGiB(),
		loadBefore: host.LoadAverage()}
	out, err := exec.CommandContext(ctx, cfg.binary, "version").Output()
	m.trainyard = strings.TrimSpace(string(out))
	if err != nil || m.trainyard == "" {
		m.trainyard = "unknown version"
	}
	return m
}

// quantile returns the q-quantile of ds (0 <= q <= 1), interpolating linearly between the
// two nearest ranks; 0 for no values.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + time.Duration(float64(s[hi]-s[lo])*(pos-float64(lo)))
}

// ms writes a duration in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// mb writes bytes in MB (10^6 bytes) with one decimal.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// size writes bytes in kB (10^3 bytes) below 1 MB, else in MB.
func size(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return mb(n)
}

// renderReport writes the Markdown summary.
func renderReport(cfg *config, m machine, res results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## `trainyard server`: submit to running, submissions per second, memory\n\n")
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), %s, %s; %s\n", m.cpus, m.cpu, m.memory, m.kernel, m.trainyard)
	fmt.Fprintf(&b, "- load average (1, 5, 15 min): %s before, %s after\n", m.loadBefore, m.loadAfter)
	fmt.Fprintf(&b, "- command: `go run ./bench/server %s`\n\n", strings.Join(os.Args[1:], " "))
	writeLatency(&b, cfg, res.latency)
	writeRates(&b, res)
	writeMemory(&b, res.memory)
	return b.String()
}

// writeLatency writes the submit-to-running table.
func writeLatency(b *strings.Builder, cfg *config, trials []latencyTrial) {
	fmt.Fprintf(b, "### Submit to running (idle server)\n\n%d jobs of `sleep 1`, submitted one at a time, each polled every %s "+
		"until it runs and until it ends; after each, `trainyard run -- sleep 1` started by hand.\n\n", len(trials), cfg.poll)
	b.WriteString("| measure | median | p90 | min | max |\n|---|---|---|---|---|\n")
	rows := []struct {
		name string
		get  func(latencyTrial) time.Duration
	}{
		{"job record: StartedAt − SubmittedAt", func(t latencyTrial) time.Duration { return t.recorded }},
		{"client: Submit called → GET shows RUNNING", func(t latencyTrial) time.Duration { return t.running }},
		{"client: Submit called → supervisor's first console line", func(t latencyTrial) time.Duration { return t.firstLine }},
		{"by hand: `trainyard run -- sleep 1` started → first output line", func(t latencyTrial) time.Duration { return t.yardstick }},
	}
	for _, r := range rows {
		ds := make([]time.Duration, len(trials))
		for i, t := range trials {
			ds[i] = r.get(t)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", r.name, ms(quantile(ds, 0.5)), ms(quantile(ds, 0.9)),
			ms(slices.Min(ds)), ms(slices.Max(ds)))
	}
	first, hand := make([]time.Duration, len(trials)), make([]time.Duration, len(trials))
	for i, t := range trials {
		first[i], hand[i] = t.firstLine, t.yardstick
	}
	fmt.Fprintf(b, "\nThe server adds %s (median to the first console line, minus the median by hand).\n\n",
		ms(quantile(first, 0.5)-quantile(hand, 0.5)))
}

// writeRates writes the submission-rate table.
func writeRates(b *strings.Builder, res results) {
	b.WriteString("### Submissions per second\n\n")
	b.WriteString("| operation | count | concurrent | wall | per second | median each | p90 each | p99 each |\n|---|---|---|---|---|---|---|---|\n")
	rows := []struct {
		name string
		r    rate
	}{
		{"`client.Submit` (`POST /api/v1/jobs`), jobs queued behind a blocker", res.http},
		{"`store.Create` of the same records, in a store of its own", res.store},
	}
	for _, row := range rows {
		fmt.Fprintf(b, "| %s | %d | %d | %s | %.0f | %s | %s | %s |\n", row.name, row.r.n, row.r.workers,
			ms(row.r.wall), row.r.perSecond(), ms(quantile(row.r.each, 0.5)), ms(quantile(row.r.each, 0.9)), ms(quantile(row.r.each, 0.99)))
	}
	fmt.Fprintf(b, "| `client.Stop` of every queued job, then the blocker | %d | %d | %s | %.0f | | | |\n",
		res.drain.n, res.drain.workers, ms(res.drain.wall), res.drain.perSecond())
	if h := res.http.perSecond(); h > 0 {
		fmt.Fprintf(b, "\nThe store alone creates %.1f× as many records per second as the server accepts jobs.\n\n", res.store.perSecond()/h)
	}
}

// writeMemory writes the memory tables.
func writeMemory(b *strings.Builder, r memoryResult) {
	fmt.Fprintf(b, "### Memory with %d finished and %d queued jobs\n\n", r.finished, r.queued)
	fmt.Fprintf(b, "%d finished jobs written with `store.Create`, each with a run folder holding its `run.json`, in %s; "+
		"state file %s after that, %s at the end.\n\n", r.finished, r.seed.Round(10*time.Millisecond), mb(r.seededBytes), mb(r.stateBytes))
	b.WriteString("| server process | VmRSS | VmHWM (peak) |\n|---|---|---|\n")
	var peak int64
	for _, p := range r.points {
		fmt.Fprintf(b, "| %s | %s | %s |\n", p.what, mb(p.mem.RSS), mb(p.mem.HWM))
		peak = max(peak, p.mem.HWM)
	}
	b.WriteString("\n| request | answer | time |\n|---|---|---|\n")
	for _, q := range r.requests {
		fmt.Fprintf(b, "| `GET %s` | %s | %s |\n", q.path, size(q.bytes), ms(q.took))
	}
	verdict := "met"
	if peak >= memoryAim {
		verdict = "NOT met"
	}
	fmt.Fprintf(b, "\nAim, a peak under %s: %s (peak %s).\n", mb(memoryAim), verdict, mb(peak))
}
