package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/shell"
)

// machineInfo describes where and how the benchmark ran.
type machineInfo struct {
	date, cpu, kernel, memory, python, command string
	versions                                   []string // trainyard version of each binary
	cores                                      int
	loadBefore, loadAfter                      string
}

func describeMachine(cfg *config) machineInfo {
	info := machineInfo{date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpu: host.CPU(), kernel: host.Kernel(),
		memory: host.MemTotalGiB(), cores: runtime.NumCPU(), loadBefore: loadAverage(),
		command: shell.Join(append([]string{"go", "run", "./bench/soak"}, os.Args[1:]...))}
	out, err := exec.Command(cfg.python, "--version").CombinedOutput()
	info.python = strings.TrimSpace(string(out))
	if err != nil {
		info.python = "? (" + err.Error() + ")"
	}
	for _, b := range cfg.binaries() {
		info.versions = append(info.versions, b.label+": "+version(b.path))
	}
	return info
}

func loadAverage() string { return host.LoadAverage() }

// version returns the first line of `trainyard version`.
func version(trainyard string) string {
	out, err := exec.Command(trainyard, "version").Output()
	if err != nil {
		return "trainyard version: " + err.Error()
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}

// memory is the launcher's resident memory at a point of the trial, in bytes: all of it
// (VmRSS) and its anonymous part (RssAnon: the heap and stacks, without the pages of the
// binary that are mapped in).
type memory struct{ rss, anon int64 }

// figures are what a trial's samples say about the launcher's memory and time.
type figures struct {
	before, reportsMax, afterReports, outputMax, after, atExit memory
	reportsAt                                                  [3]memory // at a quarter, half and three quarters of the reports' time
	peak                                                       int64     // VmHWM
	reports, output                                            time.Duration
	samples                                                    int
}

// summarize reads the figures off a trial's samples and the worker's phase marks.
func summarize(t trial) figures {
	p := t.phases
	f := figures{samples: len(t.samples), reports: p["reports-end"].Sub(p["reports-begin"]),
		output: p["output-end"].Sub(p["output-begin"])}
	f.before = last(t.samples, p["reports-begin"])
	for i := range f.reportsAt {
		f.reportsAt[i] = last(t.samples, p["reports-begin"].Add(f.reports*time.Duration(i+1)/4))
	}
	f.reportsMax = largest(t.samples, p["reports-begin"], p["output-begin"])
	f.afterReports = last(t.samples, p["output-begin"])
	f.outputMax = largest(t.samples, p["output-begin"], p["output-end"])
	f.after = last(t.samples, p["done"])
	if n := len(t.samples); n > 0 {
		s := t.samples[n-1]
		f.atExit, f.peak = memory{s.rss, s.anon}, s.hwm
	}
	return f
}

// last is the memory of the last sample before the time, or zero.
func last(samples []sample, before time.Time) memory {
	var m memory
	for _, s := range samples {
		if !s.at.Before(before) {
			break
		}
		m = memory{s.rss, s.anon}
	}
	return m
}

// largest is the largest memory sampled in [from, to), or zero; RSS and its anonymous
// part each at its own largest.
func largest(samples []sample, from, to time.Time) memory {
	var m memory
	for _, s := range samples {
		if !s.at.Before(from) && s.at.Before(to) {
			m.rss, m.anon = max(m.rss, s.rss), max(m.anon, s.anon)
		}
	}
	return m
}

// line is a trial's one-line summary, printed as it ends.
func (t trial) line() string {
	f := summarize(t)
	return fmt.Sprintf("%s: RSS (anonymous) before %s, after reports %s, after output %s, peak RSS %s; %d reports in %s, %s of output in %s; took %s",
		t.bin.label, f.before, f.afterReports, f.after, mb(f.peak), t.results, f.reports.Round(time.Millisecond),
		size(t.logSize), f.output.Round(time.Millisecond), t.took.Round(time.Second))
}

// String is "45.1 (6.6) MB": VmRSS, and in parentheses its anonymous part.
func (m memory) String() string {
	if m.rss == 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f (%.1f) MB", float64(m.rss)/1e6, float64(m.anon)/1e6)
}

func mb(b int64) string {
	if b == 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}

func size(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// render is the summary as Markdown.
func render(info machineInfo, trials []trial) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## bench/soak, %s\n\n", info.date)
	fmt.Fprintf(&b, "- machine: %d cores, %s, %s memory, kernel %s; %s\n", info.cores, info.cpu, info.memory, info.kernel, info.python)
	for _, v := range info.versions {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	fmt.Fprintf(&b, "- command: `%s`\n", info.command)
	for _, t := range trials {
		fmt.Fprintf(&b, "- %s ran: `%s`\n", t.bin.label, shell.Join(t.argv))
	}
	fmt.Fprintf(&b, "- load average before %s, after %s\n\n", info.loadBefore, info.loadAfter)
	b.WriteString(table(trials))
	for _, t := range trials {
		if t.check != "" {
			fmt.Fprintf(&b, "\n**%s's run folder is not what the worker made:** %s\n", t.bin.label, t.check)
		}
	}
	return b.String()
}

// table puts the trials' figures side by side.
func table(trials []trial) string {
	rows := []struct {
		name string
		cell func(t trial, f figures) string
	}{
		{"launcher RSS (anonymous) before the reports: idle, worker started", func(_ trial, f figures) string { return f.before.String() }},
		{"a quarter of the way through the reports", func(_ trial, f figures) string { return f.reportsAt[0].String() }},
		{"half way", func(_ trial, f figures) string { return f.reportsAt[1].String() }},
		{"three quarters of the way", func(_ trial, f figures) string { return f.reportsAt[2].String() }},
		{"largest sample during the reports", func(_ trial, f figures) string { return f.reportsMax.String() }},
		{"after the reports", func(_ trial, f figures) string { return f.afterReports.String() }},
		{"largest sample during the output", func(_ trial, f figures) string { return f.outputMax.String() }},
		{"after the output", func(_ trial, f figures) string { return f.after.String() }},
		{"at exit (the results table printed)", func(_ trial, f figures) string { return f.atExit.String() }},
		{"**peak RSS (VmHWM)**", func(_ trial, f figures) string { return "**" + mb(f.peak) + "**" }},
		{"reports (result.json lines)", func(t trial, _ figures) string { return fmt.Sprint(t.results) }},
		{"time of the reports (the worker's clock)", func(t trial, f figures) string {
			return fmt.Sprintf("%s (%.1f µs each)", f.reports.Round(100*time.Millisecond), perCall(f.reports, t.results))
		}},
		{"output (rank 0's log file)", func(t trial, _ figures) string { return size(t.logSize) }},
		{"time of the output", func(_ trial, f figures) string { return f.output.Round(100 * time.Millisecond).String() }},
		{"whole run", func(t trial, _ figures) string { return t.took.Round(time.Second).String() }},
		{"memory samples", func(_ trial, f figures) string { return fmt.Sprint(f.samples) }},
	}
	var b strings.Builder
	b.WriteString("| measure |")
	sep := "|---|"
	for _, t := range trials {
		fmt.Fprintf(&b, " %s |", t.bin.label)
		sep += "---:|"
	}
	b.WriteString("\n" + sep + "\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r.name)
		for _, t := range trials {
			fmt.Fprintf(&b, " %s |", r.cell(t, summarize(t)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func perCall(d time.Duration, n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}
