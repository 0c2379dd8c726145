package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// restartMode is who restarts a gang after a kill, and what the kill hits.
type restartMode string

// The three ways a gang comes back, in the order each round runs them.
const (
	// inPlace: rank 1's Python in worker 1's pod is SIGKILLed; the gang restarts on its pods.
	inPlace restartMode = "in place"
	// recreated: worker 1's `trainyard worker` (its container's first process) is
	// SIGKILLed, which the gang cannot restart in place: the pod fails, and the operator
	// deletes the attempt's pods and creates the next attempt's.
	recreated restartMode = "recreated"
	// local: rank 1's Python under `trainyard run --workers W` on the host is SIGKILLed.
	local restartMode = "trainyard run"
)

var restartModes = []restartMode{inPlace, recreated, local}

// restartResult is one trial: the kill to every rank of the next attempt in the process
// group, and the CPU seconds each restarted rank's Python had used by then.
type restartResult struct {
	mode    restartMode
	workers int
	took    time.Duration
	// started is the kill to every rank's new Python at the first line of the script:
	// the restart's own path (signals, the coordinator, new processes), without the
	// CPU-bound import of torch and join that follow it on W ranks sharing the cores.
	started time.Duration
	cpuMean float64 // seconds per rank: import torch, init_process_group, first all-reduce
	cpuMax  float64
	note    string
}

// mark is a line of the script's MARKS/rank-N: an attempt's process group up.
type mark struct {
	attempt string
	at      time.Time
	cpu     float64
	started time.Time // the script's first line; zero in lines of an older ddp.py
}

// inplaceBench runs rounds of the three restart modes: round 1 of every gang size, then
// round 2 of those with more, and so on. Past until (when set) it starts no trial, and
// a trial still waiting then gives up; what was measured is reported.
func (b *bench) inplaceBench(ctx context.Context, script string, sizes []gangSize, until time.Time) error {
	src, err := os.ReadFile(script)
	if err != nil {
		return err
	}
	code := filepath.Join(b.shared, "code")
	if err := os.MkdirAll(code, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(code, "ddp.py"), src, 0o644); err != nil {
		return err
	}
	localScript, err := filepath.Abs(script)
	if err != nil {
		return err
	}
	mctx := ctx
	if !until.IsZero() {
		var cancel context.CancelFunc
		mctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	var all []restartResult
	err = func() error {
		for i := range slices.MaxFunc(sizes, func(a, b gangSize) int { return a.runs - b.runs }).runs {
			for _, g := range sizes {
				if i >= g.runs {
					continue
				}
				for _, m := range restartModes {
					if mctx.Err() != nil {
						return fmt.Errorf("stopped at -until %s", until.Format(time.RFC3339))
					}
					r, err := b.trial(ctx, mctx, localScript, m, g.workers, i)
					if err != nil {
						return fmt.Errorf("%s, %d workers: %w", m, g.workers, err)
					}
					all = append(all, r)
				}
			}
		}
		return nil
	}()
	printInplaceTable(all, sizes)
	return err
}

// trial runs one trial and prints its line; mctx bounds its waiting, ctx its clean-up.
func (b *bench) trial(ctx, mctx context.Context, localScript string, m restartMode, w, i int) (restartResult, error) {
	name := fmt.Sprintf("ip%d-%s-%d", w, strings.Fields(string(m))[0], i)
	if m == inPlace {
		name = fmt.Sprintf("ip%d-inplace-%d", w, i)
	}
	var r restartResult
	var err error
	if m == local {
		r, err = b.localTrial(ctx, mctx, localScript, w, name)
	} else {
		r, err = b.clusterTrial(ctx, mctx, m, w, name)
	}
	if err != nil {
		return r, err
	}
	fmt.Printf("%s trial %-14s workers %2d: kill -> all %d ranks started %6.2f s, in the process group %6.2f s; CPU per rank %.2f s (max %.2f); load %s%s\n",
		time.Now().UTC().Format("15:04:05"), r.mode, w, w, r.started.Seconds(), r.took.Seconds(), r.cpuMean, r.cpuMax, loadavg(), r.note)
	return r, nil
}

// printInplaceTable prints the medians per gang size and mode, as Markdown.
func printInplaceTable(all []restartResult, sizes []gangSize) {
	fmt.Println()
	fmt.Println("| workers | in place | recreated | `trainyard run` | in place / local | recreated / local | kill → every rank's Python started (in place / recreated / local) | CPU s per rank (in place / recreated / local) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, g := range sizes {
		w := g.workers
		med, start := map[restartMode]time.Duration{}, map[restartMode]time.Duration{}
		cpu := map[restartMode]float64{}
		for _, m := range restartModes {
			var ds, ss []time.Duration
			var cs []float64
			for _, r := range all {
				if r.workers == w && r.mode == m {
					ds, ss, cs = append(ds, r.took), append(ss, r.started), append(cs, r.cpuMean)
				}
			}
			if len(ds) == 0 {
				continue
			}
			med[m], start[m] = median(ds), median(ss)
			slices.Sort(cs)
			cpu[m] = cs[len(cs)/2]
		}
		sec := func(m restartMode) string {
			if med[m] == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f s", med[m].Seconds())
		}
		ratio := func(m restartMode) string {
			if med[m] == 0 || med[local] == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", float64(med[m])/float64(med[local]))
		}
		started := func(m restartMode) string {
			if start[m] == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f s", start[m].Seconds())
		}
		fmt.Printf("| %d | %s | %s | %s | %s | %s | %s / %s / %s | %.2f / %.2f / %.2f |\n", w,
			sec(inPlace), sec(recreated), sec(local), ratio(inPlace), ratio(recreated),
			started(inPlace), started(recreated), started(local), cpu[inPlace], cpu[recreated], cpu[local])
	}
}

// tinyJob is a W-worker TrainJob of the benchmark's script, asking 10m CPU per worker so
// that 32 fit on the one node.
func (b *bench) tinyJob(name string, workers int) *v1.TrainJob {
	tj := b.trainJob(name, []string{"python3", "/shared/code/ddp.py", "--marks", "/shared/marks/" + name})
	tj.Spec.Workers = ptr(int32(workers))
	tj.Spec.MaxRestarts = 3
	tj.Spec.Resources.CPU = ptr(resource.MustParse("10m"))
	return tj
}

// clusterTrial runs a TrainJob of w workers, kills worker 1 as mode says once every rank
// is in the process group, and times the restarted gang.
func (b *bench) clusterTrial(ctx, mctx context.Context, mode restartMode, w int, name string) (restartResult, error) {
	marks := filepath.Join(b.shared, "marks", name)
	if err := makeMarks(marks); err != nil {
		return restartResult{}, err
	}
	if err := b.submit(b.tinyJob(name, w)); err != nil {
		return restartResult{}, err
	}
	defer b.remove(ctx, name)
	r, err := measureRestart(mctx, marks, "/shared/marks/"+name, w, mode == recreated)
	if err != nil {
		return r, err
	}
	r.mode = mode
	want := name + "-a1-"
	if mode == recreated {
		want = name + "-a2-"
	}
	if n := b.running(ctx, want); n != w {
		r.note = fmt.Sprintf(" (warning: %d of %d pods %s* running)", n, w, want)
	}
	return r, nil
}

// localTrial runs the same gang under `trainyard run --workers w` on the host.
func (b *bench) localTrial(ctx, mctx context.Context, script string, w int, name string) (restartResult, error) {
	dir := filepath.Join(b.shared, "local", name)
	marks := filepath.Join(dir, "marks")
	if err := makeMarks(marks); err != nil {
		return restartResult{}, err
	}
	console, err := os.Create(filepath.Join(dir, "console.log"))
	if err != nil {
		return restartResult{}, err
	}
	defer console.Close()
	cmd := exec.CommandContext(ctx, b.trainyard, "run", "--workers", strconv.Itoa(w), "--storage-path", dir,
		"--name", name, "--max-restarts", "3", "--", "/usr/bin/python3", script, "--marks", marks)
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return restartResult{}, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer stopLocal(cmd.Process.Pid, exited, marks)
	r, err := measureRestart(mctx, marks, marks, w, false)
	r.mode = local
	return r, err
}

// stopLocal stops a local trial: SIGTERM to its launcher, then SIGKILL to whatever of the
// run is left after 30 s.
func stopLocal(pid int, exited <-chan struct{}, marks string) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	for _, p := range runProcs(marks) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// loadavg is the machine's 1-minute load average (every engineer's work counts).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func makeMarks(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777) // the workers' user writes here
}

// measureRestart waits for every rank's first mark, lets the gang train 3 s, SIGKILLs
// rank 1 (or, with launcher, the trainyard process above it), and waits for every rank's
// mark of a later attempt. argMarks is the --marks folder as the processes see it.
func measureRestart(ctx context.Context, marks, argMarks string, w int, launcher bool) (restartResult, error) {
	r := restartResult{workers: w}
	if err := poll(15*time.Minute, "every rank in the process group", func() bool {
		return ctx.Err() != nil || len(readMarks(marks, w, time.Time{})) == w
	}); err != nil {
		return r, err
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	time.Sleep(3 * time.Second)
	victim, err := findRank(argMarks, "1")
	if err != nil {
		return r, err
	}
	if launcher {
		if victim, err = launcherOf(victim); err != nil {
			return r, err
		}
	}
	killed := time.Now()
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		return r, fmt.Errorf("kill %d: %w", victim.pid, err)
	}
	var after map[int]mark
	if err := poll(15*time.Minute, "every rank back in the process group", func() bool {
		after = readMarks(marks, w, killed)
		return ctx.Err() != nil || len(after) == w
	}); err != nil {
		return r, err
	}
	if len(after) < w {
		return r, fmt.Errorf("%d of %d ranks back in the process group: %w", len(after), w, ctx.Err())
	}
	var last, lastStart time.Time
	for _, m := range after {
		if m.at.After(last) {
			last = m.at
		}
		if m.started.After(lastStart) {
			lastStart = m.started
		}
		r.cpuMean += m.cpu / float64(w)
		r.cpuMax = max(r.cpuMax, m.cpu)
	}
	r.took = last.Sub(killed)
	if !lastStart.IsZero() {
		r.started = lastStart.Sub(killed)
	}
	return r, nil
}

// readMarks returns, per rank, its first mark after since.
func readMarks(dir string, w int, since time.Time) map[int]mark {
	out := map[int]mark{}
	for rank := range w {
		f, err := os.Open(filepath.Join(dir, "rank-"+strconv.Itoa(rank)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 3 && len(fs) != 4 {
				continue
			}
			sec, err1 := strconv.ParseFloat(fs[1], 64)
			cpu, err2 := strconv.ParseFloat(fs[2], 64)
			at := time.Unix(0, int64(sec*1e9))
			if err1 == nil && err2 == nil && at.After(since) {
				m := mark{attempt: fs[0], at: at, cpu: cpu}
				if len(fs) == 4 {
					if s, err := strconv.ParseFloat(fs[3], 64); err == nil {
						m.started = time.Unix(0, int64(s*1e9))
					}
				}
				out[rank] = m
				break
			}
		}
		f.Close()
	}
	return out
}

// latestMark is when the last of the ranks' marks was written.
func latestMark(marks map[int]mark) time.Time {
	var last time.Time
	for _, m := range marks {
		if m.at.After(last) {
			last = m.at
		}
	}
	return last
}
