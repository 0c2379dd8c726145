package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/shell"
)

// machineInfo describes where and how the benchmark ran.
type machineInfo struct {
	nproc   int
	cpu     string
	kernel  string
	memory  string
	goVer   string
	cp      string
	disk    string // folder and filesystem of the run folders
	scratch string // and of the copy path's sources
	command string
	rounds  int
	warmup  int
	files   int
}

// describeMachine gathers the machine, software and command line of the run.
func describeMachine(cfg *config) machineInfo {
	cp, _ := exec.Command("cp", "--version").Output()
	return machineInfo{
		nproc:   runtime.NumCPU(),
		cpu:     host.CPU(),
		kernel:  host.Kernel(),
		memory:  host.Field("/proc/meminfo", "MemTotal"),
		goVer:   runtime.Version(),
		cp:      strings.SplitN(string(cp), "\n", 2)[0],
		disk:    fmt.Sprintf("%s (%s)", cfg.disk, fsType(cfg.root)),
		scratch: fmt.Sprintf("%s (%s)", cfg.scratch, fsType(cfg.shm)),
		command: commandLine(),
		rounds:  cfg.rounds,
		warmup:  cfg.warmup,
		files:   cfg.files,
	}
}

// header is the description printed before the trials, and at the top of the report.
func (m machineInfo) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- command: `%s`\n", m.command)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %s RAM, Linux %s\n", m.nproc, m.cpu, m.memory, m.kernel)
	fmt.Fprintf(&b, "- %s, %s\n", m.goVer, m.cp)
	fmt.Fprintf(&b, "- run folders and rename-path sources: %s; copy-path and cp sources: %s\n", m.disk, m.scratch)
	fmt.Fprintf(&b, "- %d files per checkpoint; %d warm-up round(s) of the largest size, then %d rounds per size, methods rotating\n",
		m.files, m.warmup, m.rounds)
	return b.String()
}

// summary is the medians of one size, and the best copy-path and cp+sync times.
type summary struct {
	size                                         int64
	renameTake, renameTotal                      time.Duration
	copyTake, copyTotal, cpAlone, cpSynced, cpRm time.Duration
	bestCopy, bestCpSynced, bestCpRm, bestRename time.Duration
	rounds                                       []result
}

// summarize takes the medians (and minimums) per size.
func summarize(cfg *config, results []result) []summary {
	var out []summary
	for _, size := range cfg.sizes {
		s := summary{size: size}
		for _, r := range results {
			if r.size == size {
				s.rounds = append(s.rounds, r)
			}
		}
		pick := func(m method, f func(result) time.Duration) (med, best time.Duration) {
			var v []time.Duration
			for _, r := range s.rounds {
				if r.method == m {
					v = append(v, f(r))
				}
			}
			return median(v), minimum(v)
		}
		s.renameTake, _ = pick(renamePath, func(r result) time.Duration { return r.take })
		s.renameTotal, s.bestRename = pick(renamePath, func(r result) time.Duration { return r.total })
		s.copyTake, _ = pick(copyPath, func(r result) time.Duration { return r.take })
		s.copyTotal, s.bestCopy = pick(copyPath, func(r result) time.Duration { return r.total })
		s.cpAlone, _ = pick(cpR, func(r result) time.Duration { return r.total })
		s.cpSynced, s.bestCpSynced = pick(cpR, func(r result) time.Duration { return r.synced })
		s.cpRm, s.bestCpRm = pick(cpR, func(r result) time.Duration { return r.rm })
		out = append(out, s)
	}
	return out
}

// renderReport writes the summary as Markdown.
func renderReport(info machineInfo, sums []summary) string {
	var b strings.Builder
	b.WriteString("## Checkpoint commit vs cp -r\n\n")
	b.WriteString(info.header())
	b.WriteString("\nMedians over the rounds. Times in ms, throughput in MB/s (10^6 bytes/s). " +
		"Ratios are the copy path's throughput over cp's (cp's time / the commit's); above 1 the commit is faster. " +
		"The copy-path commit includes removing its source from tmpfs, so cp+sync+rm is its like-for-like yardstick.\n\n")
	b.WriteString("| size | rename: Take | rename: commit | copy: Take | copy: commit | copy MB/s " +
		"| cp -r | cp+sync | cp+sync+rm | cp+sync MB/s | copy ÷ cp+sync | copy ÷ cp+sync+rm | copy ÷ cp alone |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sums {
		fmt.Fprintf(&b, "| %s | %.3f | %.1f | %.3f | %.1f | %.0f | %.1f | %.1f | %.1f | %.0f | %.2f | %.2f | %.2f |\n",
			sizeName(s.size), ms(s.renameTake), ms(s.renameTotal), ms(s.copyTake), ms(s.copyTotal),
			mbps(s.size, s.copyTotal), ms(s.cpAlone), ms(s.cpSynced), ms(s.cpRm), mbps(s.size, s.cpSynced),
			ratio(s.cpSynced, s.copyTotal), ratio(s.cpRm, s.copyTotal), ratio(s.cpAlone, s.copyTotal))
	}
	b.WriteString("\nBest round of each (ms), as the machine's noise allows:\n\n")
	b.WriteString("| size | rename: commit | copy: commit | cp+sync | cp+sync+rm | copy ÷ cp+sync |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sums {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n", sizeName(s.size), ms(s.bestRename),
			ms(s.bestCopy), ms(s.bestCpSynced), ms(s.bestCpRm), ratio(s.bestCpSynced, s.bestCopy))
	}
	b.WriteString("\nPer round (ms): rename commit / copy commit / cp+sync\n\n")
	b.WriteString("| size | rounds |\n|---:|---|\n")
	for _, s := range sums {
		var cells []string
		for r := 1; r <= info.rounds; r++ {
			cells = append(cells, roundCell(s.rounds, r))
		}
		fmt.Fprintf(&b, "| %s | %s |\n", sizeName(s.size), strings.Join(cells, " · "))
	}
	return b.String()
}

// roundCell formats the three methods' times of one round.
func roundCell(results []result, round int) string {
	vals := map[method]float64{}
	for _, r := range results {
		if r.round == round {
			vals[r.method] = ms(r.total)
			if r.method == cpR {
				vals[r.method] = ms(r.synced)
			}
		}
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f", vals[renamePath], vals[copyPath], vals[cpR])
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// median returns the median of v (the mean of the middle two for an even count).
func median(v []time.Duration) time.Duration {
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

// minimum returns the smallest of v, or 0.
func minimum(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

// sizeName formats a size in bytes with the unit that reads best.
func sizeName(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d %s", n/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// fsType names the filesystem that holds path.
func fsType(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "?"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext2/3/4"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("type %#x", st.Type)
}

// commandLine is the command that started this program, as `go run` would take it.
func commandLine() string {
	parts := []string{"go", "run", "./bench/checkpoint"}
	for _, a := range os.Args[1:] {
		parts = append(parts, shell.Quote(a))
	}
	return strings.Join(parts, " ")
}
