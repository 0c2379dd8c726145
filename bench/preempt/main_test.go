package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseModes(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"defaults":    {in: "notice,no-notice,unchecked", want: []string{"notice", "no-notice", "unchecked"}},
		"two, spaced": {in: "no-notice, notice", want: []string{"no-notice", "notice"}},
		"unknown":     {in: "notice,jit", wantErr: true},
		"twice":       {in: "notice,notice", wantErr: true},
		"empty":       {in: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			modes, err := parseModes(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseModes(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			var got []string
			for _, m := range modes {
				got = append(got, m.name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseModes(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestTrainyardArgv(t *testing.T) {
	cfg := &config{trainyard: "ty", python: "py", script: "steps.py", steps: 100, step: 10 * time.Millisecond,
		every: 50, grace: 30 * time.Second}
	notice, _ := parseModes("notice,no-notice")
	got := [][]string{
		trainyardArgv(cfg, notice[0], "/s", "preempt-notice", "/p"),
		trainyardArgv(cfg, notice[1], "/s", "preempt-no-notice", "/p"),
	}
	want := [][]string{
		{"ty", "run", "--workers", "2", "--grace-period", "30s", "--storage-path", "/s", "--name", "preempt-notice", "--",
			"py", "steps.py", "--steps", "100", "--step-ms", "10", "--every", "50", "--progress", "/p", "--check-notice"},
		{"ty", "run", "--workers", "2", "--grace-period", "1s", "--storage-path", "/s", "--name", "preempt-no-notice", "--",
			"py", "steps.py", "--steps", "100", "--step-ms", "10", "--every", "50", "--progress", "/p"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trainyardArgv (-want +got):\n%s", diff)
	}
}

func TestParseStep(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    int
		wantErr bool
	}{
		"padded":   {in: "         481\n", want: 481},
		"bare":     {in: "7", want: 7},
		"empty":    {in: "", wantErr: true},
		"negative": {in: "-3\n", wantErr: true},
		"text":     {in: "step 4\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseStep([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseStep(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestLatestCheckpoint(t *testing.T) {
	run := t.TempDir()
	write := func(dir, step string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(run, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if step != "" {
			if err := os.WriteFile(filepath.Join(run, dir, "step"), []byte(step), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	name, step, err := latestCheckpoint(run)
	if name != "" || step != 0 || err != nil {
		t.Errorf("no checkpoint: got %q %d %v, want \"\" 0 nil", name, step, err)
	}
	write("checkpoint_000002", "1000\n")
	write("checkpoint_000010", "1234\n") // numbers, not names, order them
	write("checkpoint_000009", "1200\n")
	write(".staging-checkpoint_000011", "1500\n")
	write("checkpoint_000012.tmp", "1600\n")
	name, step, err = latestCheckpoint(run)
	if name != "checkpoint_000010" || step != 1234 || err != nil {
		t.Errorf("got %q %d %v, want checkpoint_000010 1234 nil", name, step, err)
	}
	write("checkpoint_000013", "")
	if _, _, err := latestCheckpoint(run); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a checkpoint without its step file: error %v, want one wrapping ErrNotExist", err)
	}
}

func TestSummarize(t *testing.T) {
	modes, _ := parseModes("notice,no-notice")
	res := func(mode string, reached, saved int, stopMS int) result {
		r := result{mode: mode, reached: reached, saved: saved, stop: time.Duration(stopMS) * time.Millisecond, rate: 100}
		if saved > 0 {
			r.checkpoint = "checkpoint_000001"
		}
		return r
	}
	results := []result{
		res("notice", 602, 600, 50), res("notice", 1001, 1000, 70), res("notice", 1400, 1396, 90),
		res("no-notice", 597, 500, 20), res("no-notice", 1300, 1000, 40), res("no-notice", 420, 0, 30),
		{mode: "no-notice", err: errors.New("exit 1")},
	}
	got := summarize(modes, results)
	want := []modeSummary{
		{mode: "notice", trials: 3, meanLost: 7.0 / 3, medianLost: 2, maxLost: 4,
			meanStop: 70 * time.Millisecond, maxStop: 90 * time.Millisecond, rate: 100, ratio: (7.0 / 3) / (817.0 / 3)},
		{mode: "no-notice", trials: 3, failed: 1, meanLost: 817.0 / 3, medianLost: 300, maxLost: 420,
			meanStop: 30 * time.Millisecond, maxStop: 40 * time.Millisecond, noCheckpoint: 1, rate: 100, ratio: 1},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(modeSummary{}), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("summarize (-want +got):\n%s", diff)
	}
}

func TestMedian(t *testing.T) {
	cases := map[string]struct {
		in   []int
		want float64
	}{
		"none": {nil, 0},
		"odd":  {[]int{5, 1, 3}, 3},
		"even": {[]int{4, 1, 3, 2}, 2.5},
	}
	for name, tc := range cases {
		if got := median(tc.in); got != tc.want {
			t.Errorf("%s: median(%v) = %v, want %v", name, tc.in, got, tc.want)
		}
	}
}
