package kubecli

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLineRanks(t *testing.T) {
	cases := map[string][]int{
		"[rank 3 pid 120] epoch 1":                         {3},
		"[rank 12 pid 7]":                                  {12},
		"[ranks 1-3] done [repeated 3x across workers]":    {1, 2, 3},
		"[ranks 0,4,7] NCCL INFO [repeated 3x across ...]": {0, 4, 7},
		"trainyard: attempt 2: starting worker 1":          nil,
		"[rank x pid 1] not a rank":                        nil,
		"[ranks 3-1] backwards":                            nil,
		"plain output":                                     nil,
	}
	for line, want := range cases {
		if diff := cmp.Diff(want, lineRanks(line)); diff != "" {
			t.Errorf("lineRanks(%q) (-want +got):\n%s", line, diff)
		}
	}
}

func TestParseLogLine(t *testing.T) {
	got := parseLogLine("2026-11-22T13:00:01.123456789Z [rank 0 pid 10] epoch 1: loss=0.5\n")
	if !got.at.Equal(time.Date(2026, 11, 22, 13, 0, 1, 123456789, time.UTC)) || got.text != "[rank 0 pid 10] epoch 1: loss=0.5" {
		t.Errorf("parseLogLine: %+v", got)
	}
	if got := parseLogLine("no timestamp here\r\n"); !got.at.IsZero() || got.text != "no timestamp here" {
		t.Errorf("parseLogLine without a timestamp: %+v", got)
	}
}

// stream is an open pod log holding lines "<second> <text>", seconds after 13:00.
func stream(t *testing.T, l *logReader, lines ...string) *podStream {
	t.Helper()
	var b strings.Builder
	for _, line := range lines {
		sec, text, _ := strings.Cut(line, " ")
		at := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC).Add(time.Duration(len(sec)) * time.Second)
		b.WriteString(at.Format(time.RFC3339Nano) + " " + text + "\n")
	}
	rc := io.NopCloser(strings.NewReader(b.String()))
	s := &podStream{rc: rc, r: bufio.NewReader(rc)}
	if err := s.advance(l); err != nil {
		t.Fatal(err)
	}
	return s
}

// The lines of several pods come out in time order; with a rank only its own lines and
// the folded ones that include it; with a tail only the last ones of them all.
func TestMerge(t *testing.T) {
	cases := map[string]struct {
		opts LogOptions
		want string
	}{
		"all":     {opts: LogOptions{Rank: -1}, want: "[rank 0 pid 1] a\n[rank 2 pid 3] b\n[rank 1 pid 2] c\n[ranks 0-1] d [repeated 2x across workers]\ntrainyard: e\n[rank 2 pid 3] f\n"},
		"rank 1":  {opts: LogOptions{Rank: 1}, want: "[rank 1 pid 2] c\n[ranks 0-1] d [repeated 2x across workers]\n"},
		"tail 2":  {opts: LogOptions{Rank: -1, Tail: 2}, want: "trainyard: e\n[rank 2 pid 3] f\n"},
		"tail 10": {opts: LogOptions{Rank: -1, Tail: 10}, want: "[rank 0 pid 1] a\n[rank 2 pid 3] b\n[rank 1 pid 2] c\n[ranks 0-1] d [repeated 2x across workers]\ntrainyard: e\n[rank 2 pid 3] f\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			l := &logReader{opts: tc.opts, out: &out}
			// Seconds are the length of the first word: "." is 1s, ".." 2s.
			worker0 := stream(t, l, ". [rank 0 pid 1] a", "... [rank 1 pid 2] c", ".... [ranks 0-1] d [repeated 2x across workers]", "..... trainyard: e")
			worker1 := stream(t, l, ".. [rank 2 pid 3] b", "...... [rank 2 pid 3] f")
			if err := l.merge([]*podStream{worker0, worker1}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
