package logstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

var rank2 = Source{Rank: 2, PID: 4242}

// plainConsole prints every line as it comes (no folding), so that what Copy hands the
// console can be read off its output.
func plainConsole(t *testing.T, out io.Writer) *Console {
	c := NewConsole(out, Options{Window: -1})
	t.Cleanup(c.Close)
	return c
}

func TestCopy(t *testing.T) {
	cases := map[string]struct {
		input       string
		wantFile    string
		wantConsole []string
	}{
		"each line whole to the file, trimmed and prefixed to the console": {
			input:       "epoch 1\nepoch 2\n",
			wantFile:    "epoch 1\nepoch 2\n",
			wantConsole: []string{"[rank 2 pid 4242] epoch 1", "[rank 2 pid 4242] epoch 2"},
		},
		"a last line without a newline is written too": {
			input:       "epoch 1\nTraceback (most recent call last):",
			wantFile:    "epoch 1\nTraceback (most recent call last):",
			wantConsole: []string{"[rank 2 pid 4242] epoch 1", "[rank 2 pid 4242] Traceback (most recent call last):"},
		},
		"CRLF stays in the file and leaves the console": {
			input:       "a\r\nb\r\n",
			wantFile:    "a\r\nb\r\n",
			wantConsole: []string{"[rank 2 pid 4242] a", "[rank 2 pid 4242] b"},
		},
		"a line redrawn with CR (a progress bar) shows its first and last update": {
			input:       "10%\r50%\r100%\n",
			wantFile:    "10%\r50%\r100%\n",
			wantConsole: []string{"[rank 2 pid 4242] 10%", "[rank 2 pid 4242] 100%"},
		},
		"tqdm: CR before each update, the last one ended by a newline": {
			input:       "\r  0%|     |\r 50%|##   |\r100%|#####|\n",
			wantFile:    "\r  0%|     |\r 50%|##   |\r100%|#####|\n",
			wantConsole: []string{"[rank 2 pid 4242]   0%|     |", "[rank 2 pid 4242] 100%|#####|"},
		},
		"an update shown at once is not shown again when the line ends": {
			input:       "100%\r\nnext\n",
			wantFile:    "100%\r\nnext\n",
			wantConsole: []string{"[rank 2 pid 4242] 100%", "[rank 2 pid 4242] next"},
		},
		"a redrawn line without a newline at the end": {
			input:       "1/3\r2/3\r3/3",
			wantFile:    "1/3\r2/3\r3/3",
			wantConsole: []string{"[rank 2 pid 4242] 1/3", "[rank 2 pid 4242] 3/3"},
		},
		"empty lines are lines": {
			input:       "\n\nx\n",
			wantFile:    "\n\nx\n",
			wantConsole: []string{"[rank 2 pid 4242] ", "[rank 2 pid 4242] ", "[rank 2 pid 4242] x"},
		},
		"bytes that are not UTF-8 pass through": {
			input:       "caf\xe9\n",
			wantFile:    "caf\xe9\n",
			wantConsole: []string{"[rank 2 pid 4242] caf\xe9"},
		},
		"no output": {
			input:       "",
			wantFile:    "",
			wantConsole: nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var file, out bytes.Buffer
			console := NewConsole(&out, Options{Window: -1})
			err := Copy(strings.NewReader(tc.input), rank2, &file, console)
			console.Close()
			if err != nil {
				t.Fatalf("Copy: %v", err)
			}
			if diff := cmp.Diff(tc.wantFile, file.String()); diff != "" {
				t.Errorf("file mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantConsole, splitLines(out.String())); diff != "" {
				t.Errorf("console mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A line longer than MaxLine arrives whole in the file, and in pieces of MaxLine bytes on
// the console, the first marked.
func TestCopyOneMiBLine(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	input := "before\n" + long + "\nafter\n"
	var file, out bytes.Buffer
	console := NewConsole(&out, Options{Window: -1})
	if err := Copy(strings.NewReader(input), rank2, &file, console); err != nil {
		t.Fatal(err)
	}
	console.Close()
	if file.String() != input {
		t.Errorf("file holds %d bytes, want the %d of the input", file.Len(), len(input))
	}
	const prefix = "[rank 2 pid 4242] "
	got := splitLines(out.String())
	if len(got) != 18 || got[0] != prefix+"before" || got[17] != prefix+"after" {
		t.Fatalf("console has %d lines of lengths %v; want before, 16 pieces, after", len(got), lengths(got))
	}
	first, ok := strings.CutSuffix(got[1], " "+SplitMarker)
	if !ok {
		t.Errorf("the first piece does not end with the marker: ...%q", got[1][len(got[1])-80:])
	}
	joined := strings.TrimPrefix(first, prefix)
	for _, piece := range got[2:17] {
		if strings.Contains(piece, SplitMarker) {
			t.Errorf("a later piece is marked too")
		}
		joined += strings.TrimPrefix(piece, prefix)
	}
	if joined != long {
		t.Errorf("the pieces joined make %d bytes, want the line's %d", len(joined), len(long))
	}
}

func TestCopyWithoutFileOrConsole(t *testing.T) {
	cases := map[string]struct {
		file        bool
		console     bool
		wantFile    string
		wantConsole []string
	}{
		"no file":    {console: true, wantConsole: []string{"[rank 2 pid 4242] a", "[rank 2 pid 4242] b"}},
		"no console": {file: true, wantFile: "a\nb"},
		"neither":    {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var fileBuf, out bytes.Buffer
			var file io.Writer
			var console *Console
			if tc.file {
				file = &fileBuf
			}
			if tc.console {
				console = plainConsole(t, &out)
			}
			r := strings.NewReader("a\nb")
			if err := Copy(r, rank2, file, console); err != nil {
				t.Fatal(err)
			}
			if r.Len() != 0 {
				t.Errorf("%d bytes left unread", r.Len())
			}
			if console != nil {
				console.Close()
			}
			got := struct {
				File    string
				Console []string
			}{fileBuf.String(), splitLines(out.String())}
			want := struct {
				File    string
				Console []string
			}{tc.wantFile, tc.wantConsole}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

var errDiskFull = errors.New("no space left on device")

// failingWriter accepts ok writes, then fails every one.
type failingWriter struct {
	ok     int
	writes int
	buf    bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > w.ok {
		return 0, errDiskFull
	}
	return w.buf.Write(p)
}

// A file that fails does not stop the copy: the reader is drained (so the worker never
// blocks on a full pipe), the console gets every line, and the first error is returned.
func TestCopyFileError(t *testing.T) {
	var input strings.Builder
	var want []string
	for i := range 1000 {
		line := strings.Repeat("x", i%50) + "|"
		input.WriteString(line + "\n")
		want = append(want, "[rank 2 pid 4242] "+line)
	}
	r := strings.NewReader(input.String())
	file := &failingWriter{ok: 3}
	var out bytes.Buffer
	console := NewConsole(&out, Options{Window: -1})
	err := Copy(r, rank2, file, console)
	console.Close()

	if diff := cmp.Diff("write log of rank 2: no space left on device", errString(err)); diff != "" {
		t.Errorf("error mismatch (-want +got):\n%s", diff)
	}
	if !errors.Is(err, errDiskFull) {
		t.Errorf("errors.Is(%v, errDiskFull) = false", err)
	}
	if r.Len() != 0 {
		t.Errorf("%d bytes left unread", r.Len())
	}
	if diff := cmp.Diff(want, splitLines(out.String())); diff != "" {
		t.Errorf("console mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("|\nx|\nxx|\n", file.buf.String()); diff != "" {
		t.Errorf("file mismatch (-want +got):\n%s", diff)
	}
	if file.writes != 4 {
		t.Errorf("file written %d times, want 4: no more writes after the first error", file.writes)
	}
}

// The copy drains a pipe even when the file fails, so the process writing it finishes.
func TestCopyFileErrorDrainsPipe(t *testing.T) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Copy(pr, rank2, &failingWriter{}, nil)
	}()
	for range 10000 {
		if _, err := io.WriteString(pw, "a line the log cannot take\n"); err != nil {
			t.Fatalf("the worker's write failed: %v", err)
		}
	}
	pw.Close()
	if err := <-done; !errors.Is(err, errDiskFull) {
		t.Errorf("Copy = %v, want errDiskFull", err)
	}
}

func TestCopyReadError(t *testing.T) {
	errBroken := errors.New("broken pipe")
	cases := map[string]struct {
		file        io.Writer
		want        string
		wantConsole []string
	}{
		"what was read before the error is written": {
			file:        &bytes.Buffer{},
			want:        "read output of rank 2: broken pipe",
			wantConsole: []string{"[rank 2 pid 4242] done", "[rank 2 pid 4242] half a li"},
		},
		"with a file error too, both are returned": {
			file:        &failingWriter{},
			want:        "read output of rank 2: broken pipe\nwrite log of rank 2: no space left on device",
			wantConsole: []string{"[rank 2 pid 4242] done", "[rank 2 pid 4242] half a li"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := io.MultiReader(strings.NewReader("done\nhalf a li"), iotest.ErrReader(errBroken))
			var out bytes.Buffer
			console := NewConsole(&out, Options{Window: -1})
			err := Copy(r, rank2, tc.file, console)
			console.Close()
			if diff := cmp.Diff(tc.want, errString(err)); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if !errors.Is(err, errBroken) {
				t.Errorf("errors.Is(%v, errBroken) = false", err)
			}
			if diff := cmp.Diff(tc.wantConsole, splitLines(out.String())); diff != "" {
				t.Errorf("console mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Several ranks copied to one console at once: each rank's file gets its own lines, and
// the console folds what all ranks print, each rank's lines in their order. Run with
// -race.
func TestCopyConcurrentRanksFold(t *testing.T) {
	const ranks, lines = 4, 100
	var input strings.Builder
	var script []string
	for i := range lines {
		text := "iteration " + strings.Repeat("I", i%7)
		script = append(script, text)
		input.WriteString(text + "\n")
	}
	clock := newFakeClock() // stands still: every fold waits for Close
	var out bytes.Buffer
	console := NewConsole(&out, Options{Window: window, Now: clock.Now})
	files := make([]bytes.Buffer, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() {
			if err := Copy(strings.NewReader(input.String()), Source{Rank: r, PID: 100 + r}, &files[r], console); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		})
	}
	wg.Wait()
	console.Close()
	for r := range ranks {
		if files[r].String() != input.String() {
			t.Errorf("rank %d's file differs from its output", r)
		}
	}
	got := splitLines(out.String())
	for r, seq := range perRank(t, got) {
		if diff := cmp.Diff(script, seq); diff != "" {
			t.Errorf("rank %d's lines on the console (-want +got):\n%s", r, diff)
		}
	}
	if len(got) >= ranks*lines {
		t.Errorf("the console has %d lines for %d printed: nothing was folded", len(got), ranks*lines)
	}
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func lengths(ss []string) []int {
	n := make([]int, len(ss))
	for i, s := range ss {
		n[i] = len(s)
	}
	return n
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
