package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSummarize checks which samples count for which phase.
func TestSummarize(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	mib := int64(1 << 20)
	tr := trial{
		phases: map[string]time.Time{"reports-begin": at(1), "reports-end": at(3), "output-begin": at(4),
			"output-end": at(6), "done": at(7)},
		samples: []sample{
			{at: at(0.5), rss: 40 * mib, anon: 6 * mib, hwm: 40 * mib},
			{at: at(2), rss: 45 * mib, anon: 9 * mib, hwm: 45 * mib},
			{at: at(3.5), rss: 44 * mib, anon: 8 * mib, hwm: 45 * mib},
			{at: at(5), rss: 47 * mib, anon: 11 * mib, hwm: 47 * mib},
			{at: at(6.5), rss: 43 * mib, anon: 7 * mib, hwm: 47 * mib},
			{at: at(7.5), rss: 44 * mib, anon: 8 * mib, hwm: 48 * mib},
		},
	}
	got := summarize(tr)
	want := figures{
		before: memory{40 * mib, 6 * mib}, reportsAt: [3]memory{{40 * mib, 6 * mib}, {40 * mib, 6 * mib}, {45 * mib, 9 * mib}},
		reportsMax: memory{45 * mib, 9 * mib}, afterReports: memory{44 * mib, 8 * mib},
		outputMax: memory{47 * mib, 11 * mib}, after: memory{43 * mib, 7 * mib}, atExit: memory{44 * mib, 8 * mib},
		peak: 48 * mib, reports: 2 * time.Second, output: 2 * time.Second, samples: 6,
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(figures{}, memory{})); diff != "" {
		t.Errorf("summarize (-want +got):\n%s", diff)
	}
}

// TestSmoke runs the benchmark for real with small counts: trainyard from $TRAINYARD_BIN
// (built when unset), the worker under /usr/bin/python3.
func TestSmoke(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to run the worker")
	}
	bin := os.Getenv("TRAINYARD_BIN")
	if bin == "" {
		if testing.Short() {
			t.Skip("-short, and no $TRAINYARD_BIN: building trainyard takes too long")
		}
		bin = filepath.Join(t.TempDir(), "trainyard")
		build := exec.Command("go", "build", "-o", bin, "../../cmd/trainyard")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build trainyard: %v\n%s", err, out)
		}
	}
	cfg, err := parseFlags([]string{"-trainyard", bin, "-python", python, "-script", "worker.py",
		"-reports", "3000", "-bytes", "3000000", "-settle", "0.2s", "-timeout", "60s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.prepare(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cfg.root) })
	tr, err := runTrial(context.Background(), cfg, cfg.binaries()[0])
	if err != nil {
		t.Fatal(err)
	}
	if tr.check != "" {
		t.Errorf("the run folder is not what the worker made: %s", tr.check)
	}
	f := summarize(tr)
	if f.before.rss == 0 || f.after.rss == 0 || f.peak == 0 {
		t.Errorf("memory not sampled in every phase: %+v", f)
	}
	text := render(describeMachine(cfg), []trial{tr})
	for _, want := range []string{"| **peak RSS (VmHWM)** |", "| reports (result.json lines) | 3000 |"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
}
