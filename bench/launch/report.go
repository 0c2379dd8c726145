package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// machineInfo describes where and how the benchmark ran.
type machineInfo struct {
	nproc     int
	cpu       string
	kernel    string
	python    string   // "Python 3.11.2, torch 1.13.0a0"
	trainyard string   // `trainyard version`
	command   string   // this program's command line
	launches  []string // each launcher's command line per trial kind
	rounds    int
	warmup    int
	kinds     string // the trial kinds of a round, "run, restart"
	loadStart string // /proc/loadavg's 1, 5 and 15 minute averages before the trials
	loadEnd   string // and after them
}

// describeMachine gathers the machine, software and command lines of the run.
func describeMachine(ctx context.Context, cfg *config) machineInfo {
	py := "import sys, torch; print('Python', sys.version.split()[0] + ', torch', torch.__version__)"
	return machineInfo{
		nproc:     runtime.NumCPU(),
		cpu:       host.CPU(),
		kernel:    host.Kernel(),
		python:    output(ctx, cfg.python, "-c", py),
		trainyard: output(ctx, cfg.trainyard, "version"),
		command:   commandLine(),
		launches:  launchTemplates(cfg),
		rounds:    cfg.rounds,
		warmup:    cfg.warmup,
		kinds:     kindNames(cfg.kinds),
		loadStart: host.LoadAverage(),
	}
}

// kindNames names trial kinds, separated by commas.
func kindNames(kinds []trialKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

// launchTemplates are the launchers' command lines as given to this program, with <dir>
// and <port> for the values each trial picks.
func launchTemplates(cfg *config) []string {
	shown := *cfg
	shown.trainyard, shown.script, shown.self = cfg.trainyardArg, cfg.scriptArg, ""
	var out []string
	for _, k := range cfg.kinds {
		for _, l := range cfg.launchersFor(k) {
			argv := l.argv(&shown, "<dir>", "<port>", restartsFor(k), scriptArgs(&shown, k))
			out = append(out, fmt.Sprintf("%s (%s): `%s`", l.name, k, strings.Join(argv, " ")))
		}
	}
	return out
}

// output runs a short command and returns its trimmed output, or the error in words.
func output(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return fmt.Sprintf("unknown (%s: %v)", name, err)
	}
	return strings.TrimSpace(string(b))
}

// printHeader writes the machine and commands before the first trial.
func printHeader(w io.Writer, info machineInfo) {
	fmt.Fprintf(w, "machine: %s\n", info.machine())
	fmt.Fprintf(w, "command: %s\n", info.command)
	for _, l := range info.launches {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "%d warm-up round(s), then %d round(s); each round: %s, trainyard then torchrun (then the bare ranks and the server, when asked)\n",
		info.warmup, info.rounds, info.kinds)
}

// machine describes the machine on one line.
func (m machineInfo) machine() string {
	return fmt.Sprintf("%d CPUs (nproc), %s, Linux %s; %s; %s", m.nproc, m.cpu, m.kernel, m.python, m.trainyard)
}

// metric is one measured quantity, with each launcher's successful values in order.
type metric struct {
	name   string
	format func(time.Duration) string
	values map[string][]time.Duration
}

// summary is every metric's values, the failures and the workers' OMP_NUM_THREADS.
type summary struct {
	rounds   int
	metrics  []*metric
	byRound  map[string]map[int]trialResult // launcher+kind -> round -> result
	failures []string
	omp      map[string]string
	trials   int
}

// summarize sorts the trial results into metrics.
func summarize(results []trialResult, rounds int) summary {
	first := &metric{name: "launch to first step", format: seconds, values: map[string][]time.Duration{}}
	step := &metric{name: fmt.Sprintf("steady-state step time (rank 0, median of steps %d+)", steadyFrom),
		format: millis, values: map[string][]time.Duration{}}
	recovery := &metric{name: "SIGKILL of rank 1 to restarted first step", format: seconds, values: map[string][]time.Duration{}}
	s := summary{rounds: rounds, metrics: []*metric{first, step, recovery}, byRound: map[string]map[int]trialResult{},
		omp: map[string]string{}, trials: len(results)}
	for _, r := range results {
		s.add(r, first, step, recovery)
	}
	return s
}

// add files one trial result.
func (s *summary) add(r trialResult, first, step, recovery *metric) {
	name := r.spec.launcher.name
	key := name + " " + r.spec.kind.String()
	if s.byRound[key] == nil {
		s.byRound[key] = map[int]trialResult{}
	}
	s.byRound[key][r.spec.round] = r
	switch {
	case r.err != nil:
		s.failures = append(s.failures, fmt.Sprintf("round %d %s %s: %v", r.spec.round, name, r.spec.kind, r.err))
	case r.spec.kind == restartRun:
		recovery.values[name] = append(recovery.values[name], r.recovery)
		s.omp[name] = r.omp
	default:
		first.values[name] = append(first.values[name], r.firstStep)
		step.values[name] = append(step.values[name], r.stepTime)
	}
}

// failureError is an error if any trial failed.
func (s summary) failureError() error {
	if len(s.failures) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d trials failed", len(s.failures), s.trials)
}

// renderReport is the Markdown summary: machine, commands, medians, raw values.
func renderReport(info machineInfo, s summary, results []trialResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#### trainyard run vs torchrun: 2 ranks, Fashion-MNIST MLP, %d rounds\n\n", info.rounds)
	fmt.Fprintf(&b, "- machine: %s\n", info.machine())
	fmt.Fprintf(&b, "- command: `%s`\n", info.command)
	for _, l := range info.launches {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "- worker OMP_NUM_THREADS: trainyard %s, torchrun %s\n",
		orQ(s.omp["trainyard"]), orQ(s.omp["torchrun"]))
	fmt.Fprintf(&b, "- load average (1/5/15 min) before: %s, after: %s\n", info.loadStart, info.loadEnd)
	fmt.Fprintf(&b, "- %d warm-up round(s) not counted; launchers alternate in every round\n\n", info.warmup)
	writeSummaryTable(&b, s)
	b.WriteString("\n")
	writeRawTable(&b, s)
	for _, f := range s.failures {
		fmt.Fprintf(&b, "\nFAILED: %s\n", f)
	}
	return b.String()
}

// writeSummaryTable writes each metric's medians and their ratio; with bare ranks' or a
// server's trials, their medians and ratio to torchrun's too, and with bare ranks what
// trainyard run adds to their launch.
func writeSummaryTable(w io.Writer, s summary) {
	head, rule := "| metric (median over rounds) | trainyard | torchrun | trainyard/torchrun (lower is better) |", "|---|---:|---:|---:|"
	extras := s.extraLaunchers()
	for _, x := range extras {
		head, rule = head+fmt.Sprintf(" %s | %s/torchrun |", x.title, x.launcher.name), rule+"---:|---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, m := range s.metrics {
		ty, tr := m.values["trainyard"], m.values["torchrun"]
		row := []string{m.name, cell(m, ty), cell(m, tr), ratio(ty, tr)}
		for _, x := range extras {
			v := m.values[x.launcher.name]
			row = append(row, cell(m, v), ratio(v, tr))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	if ty, bare := s.metrics[0].values["trainyard"], s.metrics[0].values[bareLauncher.name]; len(ty) > 0 && len(bare) > 0 {
		fmt.Fprintf(w, "\ntrainyard run's launch to first step over the bare ranks': %s (%+.0f ms); the bare ranks' over torchrun's: %s\n",
			ratio(ty, bare), float64(medianDuration(ty)-medianDuration(bare))/float64(time.Millisecond),
			ratio(bare, s.metrics[0].values["torchrun"]))
	}
}

// extraLauncher is an optional launcher of plain trials, and how the tables name it.
type extraLauncher struct {
	launcher launcher
	title    string
}

// extraLaunchers are the optional launchers with plain trials in this run, in order.
func (s summary) extraLaunchers() []extraLauncher {
	var out []extraLauncher
	for _, x := range []extraLauncher{{bareLauncher, "bare ranks (no launcher)"}, {serverLauncher, "trainyard server --prestart"}} {
		if len(s.byRound[x.launcher.name+" "+plainRun.String()]) > 0 {
			out = append(out, x)
		}
	}
	return out
}

// ratio is the ratio of the medians of a and b, or "n/a".
func ratio(a, b []time.Duration) string {
	if len(a) == 0 || len(b) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(medianDuration(a))/float64(medianDuration(b)))
}

// cell formats a median with its count of values, or "n/a".
func cell(m *metric, vals []time.Duration) string {
	if len(vals) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s (n=%d)", m.format(medianDuration(vals)), len(vals))
}

// writeRawTable writes every round's values, one row per round.
func writeRawTable(w io.Writer, s summary) {
	cols := rawColumns
	head, rule := "| round | first step: trainyard | first step: torchrun | step time: trainyard | step time: torchrun | restart: trainyard | restart: torchrun |", "|---:|---:|---:|---:|---:|---:|---:|"
	for _, x := range s.extraLaunchers() {
		cols = append(cols[:len(cols):len(cols)], plainColumns(x.launcher.name)...)
		head, rule = head+fmt.Sprintf(" first step: %s | step time: %s |", x.launcher.name, x.launcher.name), rule+"---:|---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for r := 1; r <= s.rounds; r++ {
		row := []string{fmt.Sprint(r)}
		for _, col := range cols {
			row = append(row, s.rawCell(col.key, r, col.value))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// rawColumn is one value column of the raw table: a launcher and kind, and its value.
type rawColumn struct {
	key   string
	value func(trialResult) string
}

// rawColumns are the raw table's value columns after the round.
var rawColumns = []rawColumn{
	{"trainyard run", func(r trialResult) string { return seconds(r.firstStep) }},
	{"torchrun run", func(r trialResult) string { return seconds(r.firstStep) }},
	{"trainyard run", func(r trialResult) string { return millis(r.stepTime) }},
	{"torchrun run", func(r trialResult) string { return millis(r.stepTime) }},
	{"trainyard restart", func(r trialResult) string { return seconds(r.recovery) }},
	{"torchrun restart", func(r trialResult) string { return seconds(r.recovery) }},
}

// plainColumns are the raw table's columns of an optional launcher's plain trials.
func plainColumns(name string) []rawColumn {
	key := name + " " + plainRun.String()
	return []rawColumn{
		{key, func(r trialResult) string { return seconds(r.firstStep) }},
		{key, func(r trialResult) string { return millis(r.stepTime) }},
	}
}

// rawCell is one trial's value, "failed", or "-" when the trial did not run.
func (s summary) rawCell(key string, round int, value func(trialResult) string) string {
	r, ok := s.byRound[key][round]
	switch {
	case !ok:
		return "-"
	case r.err != nil:
		return "failed"
	}
	return value(r)
}

// orQ returns s, or "?" if it is empty.
func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// medianDuration is median for durations.
func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// seconds formats d as seconds with 2 decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// millis formats d as milliseconds with 2 decimals.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
