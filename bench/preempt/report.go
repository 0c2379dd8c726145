package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/shell"
)

// Ray Train's figures, from its preemption benchmark (ray-project/ray PR 65047, "[train]
// Add preemption benchmark release test"): 8 workers, ViT-B/16, 1,600 target steps of
// about 1.13 s, a checkpoint every 400 steps, 5 attempts (4 preemptions) per arm. The
// wasted steps are totals over the run: periodic checkpoints only (baseline) against a
// just-in-time checkpoint at get_preemption_info()'s first signal (jit).
const (
	rayBaselineWasted = 517
	rayJITWasted      = 91
)

// machineInfo describes where and how the benchmark ran.
type machineInfo struct {
	nproc                 int
	cpu, kernel, memory   string
	python, trainyard     string
	command               string
	loadBefore, loadAfter string
	cfg                   *config
}

// describeMachine gathers the machine, software and command line of the run.
func describeMachine(ctx context.Context, cfg *config) machineInfo {
	return machineInfo{
		nproc:      runtime.NumCPU(),
		cpu:        host.CPU(),
		kernel:     host.Kernel(),
		memory:     host.MemTotalGiB(),
		python:     output(ctx, cfg.python, "--version"),
		trainyard:  output(ctx, cfg.trainyard, "version"),
		command:    commandLine(),
		loadBefore: host.LoadAverage(),
		cfg:        cfg,
	}
}

// output is the first line of a command's output, or "?".
func output(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// header is the description printed before the trials, and at the top of the report.
func (m machineInfo) header() string {
	c := m.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "- command: `%s`\n", m.command)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %s RAM, Linux %s; %s; %s\n",
		m.nproc, m.cpu, m.memory, m.kernel, m.python, m.trainyard)
	fmt.Fprintf(&b, "- workload: `trainyard run --workers 2` of bench/preempt/steps.py: steps of %s (a sleep), "+
		"a checkpoint every %d steps, every rank reporting it (rank 0 with the folder)\n", c.step, c.every)
	fmt.Fprintf(&b, "- SIGTERM to trainyard %s to %s after rank 0's first step, uniformly at random (seed %d), "+
		"the same delay for every mode of a round; %d rounds, the modes' order rotating\n", c.from, c.to, c.seed, c.trials)
	fmt.Fprintf(&b, "- modes: %s\n", modeList(c))
	if m.loadAfter != "" {
		fmt.Fprintf(&b, "- load average before: %s; after: %s\n", m.loadBefore, m.loadAfter)
	} else {
		fmt.Fprintf(&b, "- load average before: %s\n", m.loadBefore)
	}
	return b.String()
}

// modeList describes the modes compared.
func modeList(c *config) string {
	var parts []string
	for _, m := range c.modes {
		switch {
		case m.check:
			parts = append(parts, fmt.Sprintf("**%s** (checks `trainyard.preemption()` every step, saves at the notice; --grace-period %s)", m.name, c.grace))
		case m.noNotice:
			parts = append(parts, fmt.Sprintf("**%s** (never checks; --grace-period %s: no notice, the ranks are stopped at once)", m.name, noNoticeGrace))
		default:
			parts = append(parts, fmt.Sprintf("**%s** (never checks; --grace-period %s: trainyard posts the notice and waits for the next periodic checkpoint)", m.name, c.grace))
		}
	}
	return strings.Join(parts, "; ")
}

// modeSummary is one mode's statistics over its successful trials.
type modeSummary struct {
	mode         string
	trials       int // successful trials
	failed       int
	meanLost     float64
	medianLost   float64
	maxLost      int
	meanStop     time.Duration
	maxStop      time.Duration
	afterNotice  int     // trials whose latest checkpoint was committed after the notice
	noCheckpoint int     // trials stopped before any checkpoint: all their steps are lost
	rate         float64 // median of rank 0's steps per second
	ratio        float64 // meanLost over the no-notice mode's; 0 without it
}

// summarize computes each mode's statistics, in the order of modes.
func summarize(modes []mode, results []result) []modeSummary {
	var out []modeSummary
	for _, m := range modes {
		s := modeSummary{mode: m.name}
		var lost []int
		var stops []time.Duration
		var rates []float64
		for _, r := range results {
			if r.mode != m.name {
				continue
			}
			if r.err != nil {
				s.failed++
				continue
			}
			s.trials++
			lost = append(lost, r.lost())
			stops = append(stops, r.stop)
			rates = append(rates, r.rate)
			if r.afterNotice {
				s.afterNotice++
			}
			if r.checkpoint == "" {
				s.noCheckpoint++
			}
		}
		s.meanLost, s.medianLost, s.maxLost = mean(lost), median(lost), maxOf(lost)
		s.meanStop, s.maxStop = meanDuration(stops), maxOf(stops)
		s.rate = medianFloat(rates)
		out = append(out, s)
	}
	if base := find(out, "no-notice"); base != nil && base.meanLost > 0 {
		for i := range out {
			out[i].ratio = out[i].meanLost / base.meanLost
		}
	}
	return out
}

// find returns the summary of the named mode, or nil.
func find(sums []modeSummary, name string) *modeSummary {
	for i := range sums {
		if sums[i].mode == name {
			return &sums[i]
		}
	}
	return nil
}

// renderReport writes the report as Markdown: the summary per mode, Ray Train's figure
// beside it, and every trial.
func renderReport(info machineInfo, sums []modeSummary, results []result) string {
	var b strings.Builder
	b.WriteString("## Steps lost per preemption (bench/preempt)\n\n")
	b.WriteString(info.header())
	b.WriteString("\nSteps lost = the last step rank 0 completed before the gang stopped − the step in the latest " +
		"committed checkpoint (0 when there is none): what a restart does again. Stop = SIGTERM to trainyard's exit.\n\n")
	b.WriteString("| mode | trials | steps lost: mean | median | max | mean ÷ no-notice's | mean lost in seconds " +
		"| stop: mean | stop: max | saved after the notice | no checkpoint yet |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sums {
		ratio, secs := "–", "–"
		if base := find(sums, "no-notice"); base != nil && base.meanLost > 0 && s.trials > 0 {
			ratio = fmt.Sprintf("**%.3f**", s.ratio)
		}
		if s.rate > 0 {
			secs = fmt.Sprintf("%.2f s", s.meanLost/s.rate)
		}
		fmt.Fprintf(&b, "| %s | %d%s | %.1f | %.1f | %d | %s | %s | %.2f s | %.2f s | %d/%d | %d |\n",
			s.mode, s.trials, failedNote(s.failed), s.meanLost, s.medianLost, s.maxLost, ratio, secs,
			s.meanStop.Seconds(), s.maxStop.Seconds(), s.afterNotice, s.trials, s.noCheckpoint)
	}
	if n, w := find(sums, "notice"), find(sums, "no-notice"); n != nil && w != nil && w.meanLost > 0 {
		b.WriteString("\nBeside Ray Train's published figure:\n\n")
		b.WriteString("| | without the notice | with it | with ÷ without |\n|---|---:|---:|---:|\n")
		fmt.Fprintf(&b, "| trainyard, this run: mean steps lost per preemption (2 ranks, %s steps, a checkpoint every %d) "+
			"| %.1f | %.1f | **%.3f** |\n", info.cfg.step, info.cfg.every, w.meanLost, n.meanLost, n.meanLost/w.meanLost)
		fmt.Fprintf(&b, "| Ray Train's preemption benchmark (ray-project/ray PR 65047): wasted steps over one run "+
			"with 4 preemptions (8 workers, ViT-B/16, ~1.13 s steps, a checkpoint every 400) | %d | %d | **%.2f** |\n",
			rayBaselineWasted, rayJITWasted, float64(rayJITWasted)/rayBaselineWasted)
	}
	writeTrials(&b, info.cfg, results)
	return b.String()
}

// failedNote is " (+N failed)" when N > 0.
func failedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (+%d failed)", n)
}

// writeTrials writes one row per round: each mode's reached / saved / lost / stop.
func writeTrials(b *strings.Builder, cfg *config, results []result) {
	b.WriteString("\nEvery trial: reached / saved / lost steps, stop time\n\n| round | SIGTERM after |")
	for _, m := range cfg.modes {
		fmt.Fprintf(b, " %s |", m.name)
	}
	b.WriteString("\n|---:|---:|" + strings.Repeat("---:|", len(cfg.modes)) + "\n")
	var failed []result
	for r := 1; r <= cfg.trials; r++ {
		row, delay := "", time.Duration(0)
		for _, m := range cfg.modes {
			cell := "–"
			for _, res := range results {
				if res.round != r || res.mode != m.name {
					continue
				}
				delay = res.delay
				if res.err != nil {
					cell = "failed"
					failed = append(failed, res)
				} else {
					cell = fmt.Sprintf("%d / %d / %d, %.2f s", res.reached, res.saved, res.lost(), res.stop.Seconds())
				}
			}
			row += " " + cell + " |"
		}
		if delay == 0 {
			continue // the round did not run
		}
		fmt.Fprintf(b, "| %d | %.2f s |%s\n", r, delay.Seconds(), row)
	}
	if len(failed) > 0 {
		b.WriteString("\nFailed trials:\n\n")
		for _, f := range failed {
			fmt.Fprintf(b, "- round %d, %s: %v (folder %s)\n", f.round, f.mode, f.err, f.dir)
		}
	}
}

// mean is the mean of v, or 0.
func mean(v []int) float64 {
	if len(v) == 0 {
		return 0
	}
	sum := 0
	for _, x := range v {
		sum += x
	}
	return float64(sum) / float64(len(v))
}

// median is the median of v (the mean of the middle two for an even count), or 0.
func median(v []int) float64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return medianFloat(f)
}

// medianFloat is the median of v, or 0.
func medianFloat(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// maxOf is the largest of v, or zero.
func maxOf[T int | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}

// meanDuration is the mean of v, or 0.
func meanDuration(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range v {
		sum += d
	}
	return sum / time.Duration(len(v))
}

// commandLine is the command that started this program, as `go run` would take it.
func commandLine() string {
	parts := []string{"go", "run", "./bench/preempt"}
	for _, a := range os.Args[1:] {
		parts = append(parts, shell.Quote(a))
	}
	return strings.Join(parts, " ")
}
