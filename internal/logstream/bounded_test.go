package logstream

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// clockedReader returns one part per Read, first moving the clock to the part's time.
type clockedReader struct {
	clock *fakeClock
	start time.Time
	parts []clockedPart
}

type clockedPart struct {
	at   time.Duration // since the start
	text string
}

func (r *clockedReader) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	part := r.parts[0]
	r.parts = r.parts[1:]
	r.clock.Advance(r.start.Add(part.at).Sub(r.clock.Now()))
	return copy(p, part.text), nil
}

// A progress bar redrawn with carriage returns shows its first update at once, then one
// update per ProgressEvery while it is redrawn, and its last when its line ends; the log
// file gets every byte.
func TestCopyProgressBarThrottled(t *testing.T) {
	clock := newFakeClock()
	parts := []clockedPart{
		{0, "\r  0%"}, {5 * time.Second, "\r 10%"}, {11 * time.Second, "\r 20%"},
		{16 * time.Second, "\r 30%"}, {17 * time.Second, "\r 40%"}, {30 * time.Second, "\r100%\n"},
		{31 * time.Second, "done\n"},
	}
	var input string
	for _, p := range parts {
		input += p.text
	}
	r := &clockedReader{clock: clock, start: clock.Now(), parts: parts}
	var file, out bytes.Buffer
	console := NewConsole(&out, Options{Window: -1, Now: clock.Now})
	if err := Copy(r, rank2, &file, console); err != nil {
		t.Fatal(err)
	}
	console.Close()
	if file.String() != input {
		t.Errorf("file = %q, want %q", file.String(), input)
	}
	// 0% is complete at 5 s (shown: the first), 10% at 11 s (6 s later: not shown), 20% at
	// 16 s (11 s after the last shown: shown), 30% at 17 s (not), 40% at 30 s (shown),
	// then 100% when the line ends.
	want := []string{"[rank 2 pid 4242]   0%", "[rank 2 pid 4242]  20%", "[rank 2 pid 4242]  40%",
		"[rank 2 pid 4242] 100%", "[rank 2 pid 4242] done"}
	if diff := cmp.Diff(want, splitLines(out.String())); diff != "" {
		t.Errorf("console mismatch (-want +got):\n%s", diff)
	}
}

// A split never cuts a UTF-8 character in two on the console.
func TestCopySplitKeepsCharactersWhole(t *testing.T) {
	long := strings.Repeat("x", MaxLine-1) + "é" + strings.Repeat("y", 10) // é is 2 bytes, across MaxLine
	var out bytes.Buffer
	console := NewConsole(&out, Options{Window: -1})
	if err := Copy(strings.NewReader(long+"\n"), rank2, nil, console); err != nil {
		t.Fatal(err)
	}
	console.Close()
	got := splitLines(out.String())
	want := []string{"[rank 2 pid 4242] " + strings.Repeat("x", MaxLine-1) + " " + SplitMarker,
		"[rank 2 pid 4242] é" + strings.Repeat("y", 10)}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("console has lines of lengths %v, want %v", lengths(got), lengths(want))
	}
}

// endless writes size bytes of pattern, without a newline unless the pattern has one,
// and records the largest heap seen while it is read.
type endless struct {
	pattern  []byte
	left     int
	reads    int
	maxHeapB uint64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, io.EOF
	}
	if e.reads++; e.reads%64 == 0 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		e.maxHeapB = max(e.maxHeapB, ms.HeapAlloc)
	}
	n := min(len(p), e.left)
	for i := range n {
		p[i] = e.pattern[(i+e.left)%len(e.pattern)]
	}
	e.left -= n
	return n, nil
}

// Memory stays bounded whatever a worker writes: 128 MiB as one line, or as progress
// updates without a newline.
func TestCopyMemoryBounded(t *testing.T) {
	cases := map[string]string{
		"one line":         "0123456789abcdef",
		"progress updates": "\r 42%|####      | 4242/10000 [00:42<00:58, 100.00it/s]",
	}
	for name, pattern := range cases {
		t.Run(name, func(t *testing.T) {
			runtime.GC()
			src := &endless{pattern: []byte(pattern), left: 128 << 20}
			console := NewConsole(io.Discard, Options{})
			err := Copy(src, rank2, io.Discard, console)
			console.Close()
			if err != nil {
				t.Fatal(err)
			}
			if src.maxHeapB > 32<<20 {
				t.Errorf("the heap reached %d MiB while copying 128 MiB; want it bounded (< 32 MiB)", src.maxHeapB>>20)
			}
		})
	}
}

// Lines too long to fold are written as they come, and folding holds a bounded amount of
// text: with more pending than that, the oldest fold ends early (its summary is written).
func TestConsoleFoldingBounded(t *testing.T) {
	ct := newConsoleTest(t, Options{})
	long := strings.Repeat("L", maxFoldedLine+1)
	ct.c.Line(Source{Rank: 0, PID: 10}, long)
	ct.c.Line(Source{Rank: 1, PID: 11}, long)
	ct.c.Line(Source{Rank: 0, PID: 10}, "first")
	ct.c.Line(Source{Rank: 1, PID: 11}, "first")
	filler := strings.Repeat("f", maxFoldedLine-64)
	for i := range 2 * maxPendingBytes / maxFoldedLine {
		ct.c.Line(Source{Rank: 0, PID: 10}, filler+string(rune('a'+i%26))+strings.Repeat("!", i/26))
	}
	lines := ct.lines()
	if len(lines) < 5 || lines[0] != "[rank 0 pid 10] "+long || lines[1] != "[rank 1 pid 11] "+long {
		t.Fatalf("the long line was not written twice, unfolded: lines of lengths %v", lengths(lines))
	}
	if lines[2] != "[rank 0 pid 10] first" {
		t.Errorf("third line = %q", lines[2])
	}
	found := false
	for _, l := range lines {
		found = found || l == "[rank 1 pid 11] first"
	}
	if !found {
		t.Errorf("the oldest fold did not end early when the pending texts passed %d bytes", maxPendingBytes)
	}
	ct.c.mu.Lock()
	defer ct.c.mu.Unlock()
	if ct.c.pendingBytes > maxPendingBytes {
		t.Errorf("pending texts take %d bytes, more than %d", ct.c.pendingBytes, maxPendingBytes)
	}
}
