package logstream

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRanks(t *testing.T) {
	cases := map[string]struct {
		in      string
		has     []int
		hasNot  []int
		str     string
		wantErr string
	}{
		"empty is every rank":  {in: "", has: []int{0, 1, 99}, str: ""},
		"one rank":             {in: "2", has: []int{2}, hasNot: []int{0, 1, 3}, str: "2"},
		"a list and a range":   {in: "0,2-3", has: []int{0, 2, 3}, hasNot: []int{1, 4}, str: "0,2,3"},
		"a range":              {in: "4-7", has: []int{4, 7}, hasNot: []int{3, 8}, str: "4-7"},
		"spaces are allowed":   {in: " 1 , 3 ", has: []int{1, 3}, hasNot: []int{2}, str: "1,3"},
		"not a number":         {in: "one", wantErr: `ranks "one": "one" is not a rank (0, 1, ...) or a range of ranks (2-5)`},
		"a negative rank":      {in: "-1", wantErr: `ranks "-1": "-1" is not a rank (0, 1, ...) or a range of ranks (2-5)`},
		"a range backwards":    {in: "3-1", wantErr: `ranks "3-1": "3-1" is not a rank (0, 1, ...) or a range of ranks (2-5)`},
		"an empty part":        {in: "1,,2", wantErr: `ranks "1,,2": "" is not a rank (0, 1, ...) or a range of ranks (2-5)`},
		"a range far too long": {in: "0-100000000", wantErr: `ranks "0-100000000": the range "0-100000000" is too long`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := ParseRanks(tc.in)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("error mismatch (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			for _, n := range tc.has {
				if !r.Has(n) {
					t.Errorf("Has(%d) = false", n)
				}
			}
			for _, n := range tc.hasNot {
				if r.Has(n) {
					t.Errorf("Has(%d) = true", n)
				}
			}
			if r.String() != tc.str {
				t.Errorf("String() = %q, want %q", r.String(), tc.str)
			}
		})
	}
}

func TestLineRanks(t *testing.T) {
	cases := map[string]struct {
		line   string
		want   []int
		wantOK bool
	}{
		"a rank's line":          {line: "[rank 3 pid 42] loss 0.5", want: []int{3}, wantOK: true},
		"a rank without its pid": {line: "[rank 3] x", want: []int{3}, wantOK: true},
		"a summary, a range":     {line: "[ranks 1-3] x [repeated 3x across workers]", want: []int{1, 2, 3}, wantOK: true},
		"a summary, a list":      {line: "[ranks 1,4,7] x [repeated 3x across workers]", want: []int{1, 4, 7}, wantOK: true},
		"in colour":              {line: "\x1b[33m[rank 1 pid 101]\x1b[0m y", want: []int{1}, wantOK: true},
		"trainyard's own line":   {line: "trainyard: attempt 1: starting 2 worker(s)"},
		"anything else":          {line: "[rankings] x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := LineRanks(tc.line)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ranks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FilterLines keeps the lines of the chosen ranks (and a summary that names one of
// them) and Trainyard's own, however the text is cut into writes.
func TestFilterLines(t *testing.T) {
	log := "trainyard: attempt 1: starting 4 worker(s)\n" +
		"[rank 0 pid 10] a\n" +
		"[rank 1 pid 11] b\n" +
		"[ranks 1-3] c [repeated 3x across workers]\n" +
		"[ranks 0,3] d [repeated 2x across workers]\n" +
		"[rank 2 pid 12] " + strings.Repeat("e", MaxLine) + "\n" +
		"[rank 3 pid 13] " + strings.Repeat("f", MaxLine) + "\n" +
		"[rank 2 pid 12] last, unended"
	keep, err := ParseRanks("2")
	if err != nil {
		t.Fatal(err)
	}
	want := "trainyard: attempt 1: starting 4 worker(s)\n" +
		"[ranks 1-3] c [repeated 3x across workers]\n" +
		"[rank 2 pid 12] " + strings.Repeat("e", MaxLine) + "\n" +
		"[rank 2 pid 12] last, unended"
	for _, size := range []int{1, 7, 4096, len(log)} {
		var out bytes.Buffer
		w := FilterLines(&out, keep)
		for p := log; p != ""; {
			n := min(size, len(p))
			if _, err := w.Write([]byte(p[:n])); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("writes of %d bytes: got %q..., want %q...", size, head(out.String()), head(want))
		}
	}
	var all bytes.Buffer
	if w := FilterLines(&all, Ranks{}); w.(nopCloser).Writer != &all {
		t.Errorf("with every rank, FilterLines is not the writer itself")
	}
}

func head(s string) string { return s[:min(len(s), 300)] }

// The log file keeps every line of a rank whose lines the console does not show.
func TestCopyFilteredConsoleKeepsFile(t *testing.T) {
	keep, _ := ParseRanks("0")
	var file, out bytes.Buffer
	console := NewConsole(&out, Options{Ranks: keep, Window: window})
	if err := Copy(strings.NewReader("one\ntwo\n"), rank2, &file, console); err != nil {
		t.Fatal(err)
	}
	console.Close()
	if file.String() != "one\ntwo\n" || out.String() != "" {
		t.Errorf("file %q, console %q; want every line in the file, none on the console", file.String(), out.String())
	}
}
