package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/shell"
)

// modes are steps.py's modes, in the order of the tables.
var modes = []string{"none", "report", "checkpoint"}

// modeTimes are one rank's times in one mode, as steps.py writes them (nanoseconds).
type modeTimes struct {
	StepNS     []int64 `json:"step_ns"`
	ReportNS   []int64 `json:"report_ns"`
	Checkpoint []bool  `json:"checkpoint"` // whether the report call of the same index had one
}

// rankTimes is one rank's rank-<R>.json.
type rankTimes struct {
	Rank    int                  `json:"rank"`
	Threads int                  `json:"threads"`
	Torch   string               `json:"torch"`
	Block   int                  `json:"block"`
	Every   int                  `json:"every"`
	Modes   map[string]modeTimes `json:"modes"`
}

// loadRanks reads rank-0.json .. rank-<ranks-1>.json from dir.
func loadRanks(dir string, ranks int) ([]rankTimes, error) {
	var out []rankTimes
	for r := range ranks {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", r)))
		if err != nil {
			return nil, fmt.Errorf("read rank %d's times: %w", r, err)
		}
		var rt rankTimes
		if err := json.Unmarshal(data, &rt); err != nil {
			return nil, fmt.Errorf("read rank %d's times: %w", r, err)
		}
		out = append(out, rt)
	}
	return out, nil
}

// stats summarizes a sample of durations.
type stats struct {
	n                 int
	mean, median, p90 time.Duration
}

// summarize returns the stats of ns; the zero stats for none.
func summarize(ns []int64) stats {
	if len(ns) == 0 {
		return stats{}
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	mid := len(s) / 2
	median := float64(s[mid])
	if len(s)%2 == 0 {
		median = (float64(s[mid-1]) + float64(s[mid])) / 2
	}
	p90 := s[min(len(s)-1, int(math.Ceil(0.9*float64(len(s))))-1)]
	return stats{n: len(s), mean: time.Duration(sum / float64(len(s))), median: time.Duration(median), p90: time.Duration(p90)}
}

// reportCalls splits a mode's report() times into calls without and with a checkpoint.
func reportCalls(m modeTimes) (plain, withCheckpoint []int64) {
	for i, ns := range m.ReportNS {
		if i < len(m.Checkpoint) && m.Checkpoint[i] {
			withCheckpoint = append(withCheckpoint, ns)
		} else {
			plain = append(plain, ns)
		}
	}
	return plain, withCheckpoint
}

// percent returns a as a percentage of b.
func percent(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return 100 * float64(a) / float64(b)
}

// us formats d in microseconds, or milliseconds from 10 ms on.
func us(d time.Duration) string {
	if d >= 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// stepTable is the Markdown table of step times per rank and mode.
func stepTable(out []rankTimes) string {
	var b strings.Builder
	b.WriteString("| rank | mode | steps | mean step | median step | p90 step | median vs none |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, rt := range out {
		base := summarize(rt.Modes["none"].StepNS).median
		for _, m := range modes {
			s := summarize(rt.Modes[m].StepNS)
			delta := "-"
			if m != "none" {
				delta = fmt.Sprintf("%+.2f%%", percent(s.median-base, base))
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s |\n", rt.Rank, m, s.n, us(s.mean), us(s.median), us(s.p90), delta)
		}
	}
	return b.String()
}

// callTable is the Markdown table of report() call times per rank and kind of call, with
// the median call as a percentage of the rank's median step without report().
func callTable(out []rankTimes) string {
	var b strings.Builder
	b.WriteString("| rank | call | calls | mean | median | p90 | median call / median step (none) |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, rt := range out {
		base := summarize(rt.Modes["none"].StepNS).median
		plainCk, withCk := reportCalls(rt.Modes["checkpoint"])
		rows := []struct {
			name string
			ns   []int64
		}{
			{"`report(metrics)`, mode report", rt.Modes["report"].ReportNS},
			{"`report(metrics)`, mode checkpoint", plainCk},
			{"`report(metrics, checkpoint=...)`", withCk},
		}
		for _, row := range rows {
			s := summarize(row.ns)
			if s.n == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %.2f%% |\n", rt.Rank, row.name, s.n, us(s.mean), us(s.median), us(s.p90), percent(s.median, base))
		}
	}
	return b.String()
}

// checkRun checks the run folder against what steps.py reported: rank 0's results and
// committed checkpoints. It returns a line for the summary.
func checkRun(cfg *config, out []rankTimes) string {
	dir := filepath.Join(cfg.root, "runs", "bench")
	rows, err := reporting.ReadResults(dir)
	if err != nil {
		return "run folder: " + err.Error()
	}
	cps, _ := filepath.Glob(filepath.Join(dir, "checkpoint_*"))
	wantRows := cfg.warmup + len(out[0].Modes["report"].ReportNS) + len(out[0].Modes["checkpoint"].ReportNS)
	_, withCk := reportCalls(out[0].Modes["checkpoint"])
	line := fmt.Sprintf("run folder: %d results (expected %d), %d committed checkpoints (expected %d)",
		len(rows), wantRows, len(cps), len(withCk))
	if len(rows) != wantRows || len(cps) != len(withCk) {
		line += " -- MISMATCH"
	}
	return line
}

// machineInfo describes where the benchmark ran.
type machineInfo struct {
	nproc      int
	cpu        string
	kernel     string
	goVersion  string
	trainyard  string
	command    string
	argv       string
	loadBefore string
	loadAfter  string
	took       time.Duration
}

// describeMachine gathers the machine and the command lines, before the run.
func describeMachine(cfg *config) machineInfo {
	return machineInfo{nproc: runtime.NumCPU(), cpu: host.CPU(),
		kernel: host.Kernel(), goVersion: runtime.Version(),
		trainyard: version(cfg.trainyard), command: shell.Join(os.Args), argv: shell.Join(cfg.argv()),
		loadBefore: host.LoadAverage()}
}

// render returns the whole summary, in Markdown.
func render(info machineInfo, out []rankTimes, runCheck string) string {
	var b strings.Builder
	rt := out[0]
	fmt.Fprintf(&b, "\n## trainyard.report() step-time cost\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", info.command)
	fmt.Fprintf(&b, "- trainyard: `%s`\n", info.argv)
	fmt.Fprintf(&b, "- machine: %d cores (%s), Linux %s, %s, %s, torch %s with %d thread(s) per rank\n",
		info.nproc, info.cpu, info.kernel, info.goVersion, info.trainyard, rt.Torch, rt.Threads)
	fmt.Fprintf(&b, "- modes take turns in blocks of %d steps; checkpoint every %d steps of its mode; the run took %.1f s\n",
		rt.Block, rt.Every, info.took.Seconds())
	fmt.Fprintf(&b, "- load average before: %s; after: %s\n", info.loadBefore, info.loadAfter)
	fmt.Fprintf(&b, "- %s\n\n", runCheck)
	b.WriteString("Step times (training step plus the report() call; torch.save excluded):\n\n")
	b.WriteString(stepTable(out))
	b.WriteString("\nreport() calls, timed alone:\n\n")
	b.WriteString(callTable(out))
	b.WriteString("\n" + verdict(rt) + "\n")
	return b.String()
}

// aimPercent is the aim for one report(metrics) call, in percent of a step.
const aimPercent = 1.0

// verdict compares rank 0's median report(metrics) call with the aim.
func verdict(rt rankTimes) string {
	base := summarize(rt.Modes["none"].StepNS).median
	call := summarize(rt.Modes["report"].ReportNS).median
	p := percent(call, base)
	word := "within"
	if !(p < aimPercent) {
		word = "above"
	}
	return fmt.Sprintf("Per-call cost of report(metrics) on rank 0: %s, %.2f%% of the median step without report() (%s): %s the %.0f%% aim.",
		us(call), p, us(base), word, aimPercent)
}
