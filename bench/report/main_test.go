package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/trainyard/trainyard/internal/shell"
)

func TestSummarize(t *testing.T) {
	cases := map[string]struct {
		ns   []int64
		want stats
	}{
		"none": {ns: nil, want: stats{}},
		"odd":  {ns: []int64{5, 1, 3}, want: stats{n: 3, mean: 3, median: 3, p90: 5}},
		"even": {ns: []int64{4, 1, 3, 2}, want: stats{n: 4, mean: 2, median: 2, p90: 4}},
		"ten": {ns: []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1},
			want: stats{n: 10, mean: 5, median: 5, p90: 9}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summarize(tc.ns)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(stats{})); diff != "" {
				t.Errorf("summarize(%v) (-want +got):\n%s", tc.ns, diff)
			}
		})
	}
}

func TestReportCalls(t *testing.T) {
	plain, with := reportCalls(modeTimes{ReportNS: []int64{1, 2, 3, 4}, Checkpoint: []bool{false, true, false, true}})
	if diff := cmp.Diff([][]int64{{1, 3}, {2, 4}}, [][]int64{plain, with}); diff != "" {
		t.Errorf("reportCalls (-want +got):\n%s", diff)
	}
}

func TestFormatting(t *testing.T) {
	got := []string{us(1500 * time.Nanosecond), us(9999 * time.Microsecond), us(12345 * time.Microsecond),
		shell.Quote("/usr/bin/python3"), shell.Quote("a b"), shell.Quote("it's")}
	want := []string{"2 µs", "9999 µs", "12.3 ms", "/usr/bin/python3", "'a b'", `'it'\''s'`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("formatting (-want +got):\n%s", diff)
	}
}
