package logstream

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// window is long enough that the background flush (every window/4 of real time) never
// fires during a test: only the steps' Flush calls and the fake clock decide.
const window = time.Hour

// fakeClock is a clock the test moves by hand; safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, time.November, 22, 13, 45, 1, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// consoleTest is a Console writing to a buffer, on a fake clock.
type consoleTest struct {
	t     *testing.T
	out   *bytes.Buffer
	clock *fakeClock
	c     *Console
}

func newConsoleTest(t *testing.T, opts Options) *consoleTest {
	t.Helper()
	ct := &consoleTest{t: t, out: &bytes.Buffer{}, clock: newFakeClock()}
	if opts.Window == 0 {
		opts.Window = window
	}
	opts.Now = ct.clock.Now
	ct.c = NewConsole(ct.out, opts)
	t.Cleanup(ct.c.Close)
	return ct
}

// lines returns what was written so far, one element a line. Only call it while no
// other goroutine uses the console.
func (ct *consoleTest) lines() []string {
	s := ct.out.String()
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		ct.t.Errorf("output does not end with a newline: %q", s)
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// A step does one thing to the console.
type step func(ct *consoleTest)

func line(rank, pid int, text string) step {
	return func(ct *consoleTest) { ct.c.Line(Source{Rank: rank, PID: pid}, text) }
}
func after(d time.Duration) step { return func(ct *consoleTest) { ct.clock.Advance(d) } }
func flush() step                { return func(ct *consoleTest) { ct.c.Flush(false) } }
func flushAll() step             { return func(ct *consoleTest) { ct.c.Flush(true) } }
func closeConsole() step         { return func(ct *consoleTest) { ct.c.Close() } }
func notice(text string) step    { return func(ct *consoleTest) { ct.c.Notice(text) } }

// printed checks everything written so far.
func printed(want ...string) step {
	return func(ct *consoleTest) {
		ct.t.Helper()
		if diff := cmp.Diff(want, ct.lines()); diff != "" {
			ct.t.Errorf("output so far mismatch (-want +got):\n%s", diff)
		}
	}
}

func TestConsole(t *testing.T) {
	cases := map[string]struct {
		opts  Options
		steps []step
		want  []string
	}{
		"the first copy of a line is printed at once, with rank and pid": {
			steps: []step{line(0, 4242, "loading data")},
			want:  []string{"[rank 0 pid 4242] loading data"},
		},
		"identical lines from other ranks are folded into a summary after the window": {
			steps: []step{
				line(0, 100, "epoch 1 done"),
				line(1, 101, "epoch 1 done"),
				line(2, 102, "epoch 1 done"),
				printed("[rank 0 pid 100] epoch 1 done"),
				flush(),
				printed("[rank 0 pid 100] epoch 1 done"),
				after(window),
				flush(),
			},
			want: []string{
				"[rank 0 pid 100] epoch 1 done",
				"[ranks 1-2] epoch 1 done [repeated 2x across workers]",
			},
		},
		"the summary waits for the whole window": {
			steps: []step{
				line(0, 100, "x"),
				line(1, 101, "x"),
				after(window - time.Nanosecond),
				flush(),
				printed("[rank 0 pid 100] x"),
				after(time.Nanosecond),
				flush(),
			},
			want: []string{"[rank 0 pid 100] x", "[rank 1 pid 101] x"},
		},
		"the summary names the ranks whose copies were folded, as a range": {
			steps: []step{line(3, 7, "ready"), line(1, 101, "ready"), line(0, 100, "ready"), line(2, 102, "ready"), flushAll()},
			want:  []string{"[rank 3 pid 7] ready", "[ranks 0-2] ready [repeated 3x across workers]"},
		},
		"the summary names the ranks whose copies were folded, as a list": {
			steps: []step{line(0, 100, "ready"), line(7, 107, "ready"), line(1, 101, "ready"), line(4, 104, "ready"), flushAll()},
			want:  []string{"[rank 0 pid 100] ready", "[ranks 1,4,7] ready [repeated 3x across workers]"},
		},
		"a rank repeating its own line prints it each time and is never folded": {
			steps: []step{line(0, 100, "step"), line(0, 100, "step"), line(0, 100, "step"), after(window), flush()},
			want:  []string{"[rank 0 pid 100] step", "[rank 0 pid 100] step", "[rank 0 pid 100] step"},
		},
		"a rank's own repeats are printed while other ranks' copies are folded": {
			steps: []step{
				line(0, 100, "x"),
				line(1, 101, "x"),
				line(0, 100, "x"),
				line(1, 101, "x"),
				line(2, 102, "x"),
				flushAll(),
			},
			want: []string{
				"[rank 0 pid 100] x",
				"[rank 0 pid 100] x",
				"[ranks 1-2] x [repeated 2x across workers]",
				"[rank 1 pid 101] x",
			},
		},
		"different texts are not folded": {
			steps: []step{line(0, 100, "loss 0.51"), line(1, 101, "loss 0.52"), line(2, 102, "Loss 0.51"), line(3, 103, "loss 0.51 "), flushAll()},
			want: []string{
				"[rank 0 pid 100] loss 0.51",
				"[rank 1 pid 101] loss 0.52",
				"[rank 2 pid 102] Loss 0.51",
				"[rank 3 pid 103] loss 0.51 ",
			},
		},
		"a line nobody else printed leaves no summary": {
			steps: []step{line(0, 100, "only me"), after(window), flush(), flushAll(), closeConsole()},
			want:  []string{"[rank 0 pid 100] only me"},
		},
		"after its window the same line starts a new fold": {
			steps: []step{
				line(0, 100, "x"),
				line(1, 101, "x"),
				after(window),
				flush(),
				line(2, 102, "x"),
				line(3, 103, "x"),
				flushAll(),
			},
			want: []string{
				"[rank 0 pid 100] x",
				"[rank 1 pid 101] x",
				"[rank 2 pid 102] x",
				"[rank 3 pid 103] x",
			},
		},
		"Flush(false) writes only the folds whose window ended": {
			steps: []step{
				line(0, 100, "old"),
				line(1, 101, "old"),
				after(window / 2),
				line(0, 100, "new"),
				line(1, 101, "new"),
				after(window / 2),
				flush(),
				printed("[rank 0 pid 100] old", "[rank 0 pid 100] new", "[rank 1 pid 101] old"),
				after(window / 2),
				flush(),
			},
			want: []string{
				"[rank 0 pid 100] old",
				"[rank 0 pid 100] new",
				"[rank 1 pid 101] old",
				"[rank 1 pid 101] new",
			},
		},
		"Flush(true) writes every fold, keeping each rank's order": {
			steps: []step{line(0, 100, "a"), line(0, 100, "b"), line(1, 101, "b"), line(1, 101, "a"), line(2, 102, "a"), flushAll()},
			want: []string{
				"[rank 0 pid 100] a",
				"[rank 0 pid 100] b",
				"[rank 1 pid 101] b",
				"[ranks 1-2] a [repeated 2x across workers]",
			},
		},
		"Close writes what is pending": {
			steps: []step{line(0, 100, "bye"), line(1, 101, "bye"), line(2, 102, "bye"), closeConsole()},
			want:  []string{"[rank 0 pid 100] bye", "[ranks 1-2] bye [repeated 2x across workers]"},
		},
		"Close twice writes the summary once": {
			steps: []step{line(0, 100, "bye"), line(1, 101, "bye"), closeConsole(), closeConsole()},
			want:  []string{"[rank 0 pid 100] bye", "[rank 1 pid 101] bye"},
		},
		"a negative Window disables folding": {
			opts:  Options{Window: -1},
			steps: []step{line(0, 100, "x"), line(1, 101, "x"), line(2, 102, "x"), after(window), flush(), closeConsole()},
			want:  []string{"[rank 0 pid 100] x", "[rank 1 pid 101] x", "[rank 2 pid 102] x"},
		},
		"empty lines fold like any other": {
			steps: []step{line(0, 100, ""), line(1, 101, ""), flushAll()},
			want:  []string{"[rank 0 pid 100] ", "[rank 1 pid 101] "},
		},
		"Notice is Trainyard's own line, outside folding": {
			steps: []step{line(0, 100, "x"), notice("rank 1 exited with status 1; restarting the gang (attempt 2 of 4)"), line(1, 101, "x"), flushAll()},
			want: []string{
				"[rank 0 pid 100] x",
				"trainyard: rank 1 exited with status 1; restarting the gang (attempt 2 of 4)",
				"[rank 1 pid 101] x",
			},
		},
		"Notice comes after the lines printed before it": {
			steps: []step{
				line(0, 100, "x"), line(1, 101, "x"), line(2, 102, "x"), line(1, 101, "Traceback"),
				notice("rank 1 exited with status 1"),
			},
			want: []string{
				"[rank 0 pid 100] x",
				"[ranks 1-2] x [repeated 2x across workers]",
				"[rank 1 pid 101] Traceback",
				"trainyard: rank 1 exited with status 1",
			},
		},
		"colour wraps the prefix, the summary and Notice in ANSI escapes": {
			opts: Options{Color: true},
			steps: []step{
				line(0, 100, "x"),
				line(1, 101, "y"),
				line(9, 109, "x"),
				line(10, 110, "x"),
				notice("done"),
				flushAll(),
			},
			want: []string{
				"\x1b[36m[rank 0 pid 100]\x1b[0m x",
				"\x1b[33m[rank 1 pid 101]\x1b[0m y",
				// The summary takes the colour of the first rank folded (9, like 1).
				"\x1b[33m[ranks 9-10]\x1b[0m x\x1b[2m [repeated 2x across workers]\x1b[0m",
				"\x1b[1mtrainyard:\x1b[0m done",
			},
		},
		"colours cycle over eight ranks": {
			opts: Options{Color: true, Window: -1},
			steps: []step{
				line(0, 1, "a"), line(1, 1, "a"), line(2, 1, "a"), line(3, 1, "a"), line(4, 1, "a"),
				line(5, 1, "a"), line(6, 1, "a"), line(7, 1, "a"), line(8, 1, "a"), line(15, 1, "a"),
			},
			want: []string{
				"\x1b[36m[rank 0 pid 1]\x1b[0m a",
				"\x1b[33m[rank 1 pid 1]\x1b[0m a",
				"\x1b[32m[rank 2 pid 1]\x1b[0m a",
				"\x1b[35m[rank 3 pid 1]\x1b[0m a",
				"\x1b[34m[rank 4 pid 1]\x1b[0m a",
				"\x1b[91m[rank 5 pid 1]\x1b[0m a",
				"\x1b[96m[rank 6 pid 1]\x1b[0m a",
				"\x1b[93m[rank 7 pid 1]\x1b[0m a",
				"\x1b[36m[rank 8 pid 1]\x1b[0m a",
				"\x1b[93m[rank 15 pid 1]\x1b[0m a",
			},
		},
		"plain mode writes no escapes": {
			opts:  Options{Color: false},
			steps: []step{line(0, 100, "x"), line(1, 101, "x"), notice("done"), flushAll()},
			want: []string{
				"[rank 0 pid 100] x",
				"[rank 1 pid 101] x",
				"trainyard: done",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ct := newConsoleTest(t, tc.opts)
			for _, s := range tc.steps {
				s(ct)
			}
			if diff := cmp.Diff(tc.want, ct.lines()); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Options{} folds over DefaultWindow.
func TestConsoleDefaultWindow(t *testing.T) {
	clock := newFakeClock()
	var out syncBuffer
	c := NewConsole(&out, Options{Now: clock.Now})
	defer c.Close()
	c.Line(Source{Rank: 0, PID: 100}, "x")
	c.Line(Source{Rank: 1, PID: 101}, "x")
	// The background flush may run at any time; only the fake clock decides what it writes.
	clock.Advance(DefaultWindow - time.Nanosecond)
	c.Flush(false)
	if diff := cmp.Diff("[rank 0 pid 100] x\n", out.String()); diff != "" {
		t.Errorf("before DefaultWindow (-want +got):\n%s", diff)
	}
	clock.Advance(time.Nanosecond)
	c.Flush(false)
	if diff := cmp.Diff("[rank 0 pid 100] x\n[rank 1 pid 101] x\n", out.String()); diff != "" {
		t.Errorf("after DefaultWindow (-want +got):\n%s", diff)
	}
}

// On the real clock the background flush writes the summary without anyone calling Flush.
func TestConsoleBackgroundFlush(t *testing.T) {
	var out syncBuffer
	c := NewConsole(&out, Options{Window: 20 * time.Millisecond})
	defer c.Close()
	c.Line(Source{Rank: 0, PID: 100}, "x")
	c.Line(Source{Rank: 1, PID: 101}, "x")
	want := "[rank 0 pid 100] x\n[rank 1 pid 101] x\n"
	deadline := time.Now().Add(10 * time.Second)
	for out.String() != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// Many ranks writing at once: each rank's lines come out once each, in the order it
// printed them, and the shared ones fold. Run with -race; the buffer is not
// synchronized, so the Console must serialize its writes.
func TestConsoleConcurrentLines(t *testing.T) {
	const ranks, steps = 8, 200
	ct := newConsoleTest(t, Options{})
	scripts := make([][]string, ranks)
	for r := range ranks {
		for i := range steps {
			scripts[r] = append(scripts[r], fmt.Sprintf("rank %d says %d", r, i), fmt.Sprintf("step %d done", i))
		}
	}
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() {
			for _, text := range scripts[r] {
				ct.c.Line(Source{Rank: r, PID: 1000 + r}, text)
			}
		})
	}
	wg.Go(func() {
		for i := range steps {
			ct.c.Flush(false) // the clock stands still: nothing is due
			ct.c.Notice(fmt.Sprintf("notice %d", i))
		}
	})
	wg.Wait()
	ct.c.Close()

	lines := ct.lines()
	notices := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "trainyard: notice ") {
			notices++
		}
	}
	if notices != steps {
		t.Errorf("%d notices, want %d", notices, steps)
	}
	got := perRank(t, lines)
	for r := range ranks {
		if diff := cmp.Diff(scripts[r], got[r]); diff != "" {
			t.Errorf("rank %d's lines (-printed +shown):\n%s", r, diff)
		}
	}
	t.Logf("%d lines shown for %d printed and %d notices", len(lines), 2*ranks*steps, steps)
	if len(lines) >= 2*ranks*steps+steps {
		t.Errorf("nothing was folded")
	}
}

// scan reports whether s matches format entirely (Sscanf alone ignores what follows),
// storing the values in args (pointers to int or string).
func scan(s, format string, args ...any) bool {
	if n, err := fmt.Sscanf(s, format, args...); err != nil || n != len(args) {
		return false
	}
	vals := make([]any, len(args))
	for i, a := range args {
		switch p := a.(type) {
		case *int:
			vals[i] = *p
		case *string:
			vals[i] = *p
		}
	}
	return fmt.Sprintf(format, vals...) == s
}

// parseRanks reads a summary's rank list: "3", "1-3" or "1,4,7".
func parseRanks(t *testing.T, list string) []int {
	t.Helper()
	var lo, hi int
	if scan(list, "%d-%d", &lo, &hi) {
		var rs []int
		for r := lo; r <= hi; r++ {
			rs = append(rs, r)
		}
		return rs
	}
	var rs []int
	for _, f := range strings.Split(list, ",") {
		r, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("rank list %q: %v", list, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// Close may be called from several goroutines (the launcher's and a signal handler's).
func TestConsoleConcurrentClose(t *testing.T) {
	for range 200 {
		var out syncBuffer
		c := NewConsole(&out, Options{Window: window})
		c.Line(Source{Rank: 0, PID: 100}, "x")
		c.Line(Source{Rank: 1, PID: 101}, "x")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				c.Close()
			})
		}
		close(start)
		wg.Wait()
		if diff := cmp.Diff("[rank 0 pid 100] x\n[rank 1 pid 101] x\n", out.String()); diff != "" {
			t.Fatalf("output mismatch (-want +got):\n%s", diff)
		}
	}
}

// syncBuffer is a bytes.Buffer a test may read while the console's goroutine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A console of a run whose one process launched a gang (a Ray Train driver) writes the
// gang's lines, prefixed already, as they are; its own lines still get their prefix.
func TestConsolePassesPrefixedLines(t *testing.T) {
	var b strings.Builder
	c := NewConsole(&b, Options{PassPrefixed: true, Window: -1})
	c.Line(Source{Rank: 0, PID: 7}, "[rank 1 pid 42] Train Epoch 0: 100%")
	c.Line(Source{Rank: 0, PID: 7}, "[ranks 0,1,3] loss 0.5 [repeated 3x across workers]")
	c.Line(Source{Rank: 0, PID: 7}, "trainyard: attempt 1: starting 4 worker(s)")
	c.Line(Source{Rank: 0, PID: 7}, "Training result: Result(...)")
	c.Close()
	want := "[rank 1 pid 42] Train Epoch 0: 100%\n[ranks 0,1,3] loss 0.5 [repeated 3x across workers]\n" +
		"trainyard: attempt 1: starting 4 worker(s)\n[rank 0 pid 7] Training result: Result(...)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	var plain strings.Builder
	c = NewConsole(&plain, Options{Window: -1})
	c.Line(Source{Rank: 0, PID: 7}, "[rank 1 pid 42] x")
	c.Close()
	if plain.String() != "[rank 0 pid 7] [rank 1 pid 42] x\n" {
		t.Errorf("without PassPrefixed: %q", plain.String())
	}
}

// perRank reads a console's lines back into each rank's lines, in the order the console
// shows them: a summary stands for a copy of its text from each rank it names. It fails
// the test on a summary that saves nothing (of one rank) or whose count is not its
// number of ranks, and on a line it cannot read.
func perRank(t *testing.T, lines []string) map[int][]string {
	t.Helper()
	got := map[int][]string{}
	for _, l := range lines {
		if strings.HasPrefix(l, "trainyard: ") {
			continue
		}
		ranks, ok := LineRanks(l)
		_, text, _ := strings.Cut(l, "] ")
		if !ok {
			t.Errorf("line without a rank: %q", l)
			continue
		}
		if strings.HasPrefix(l, "[ranks ") {
			var n int
			i := strings.LastIndex(text, " [repeated ")
			if i < 0 || !scan(text[i:], " [repeated %dx across workers]", &n) || n != len(ranks) || n < 2 {
				t.Errorf("summary %q: want [repeated Nx across workers] with N the number of its ranks, 2 or more", l)
				continue
			}
			text = text[:i]
		}
		for _, r := range ranks {
			got[r] = append(got[r], text)
		}
	}
	return got
}

// The example: ranks 0-5 print the same line, then one of their own. Each rank's
// lines come out in the order it printed them: ranks 1-5's own lines after the summary
// of the line they printed first.
func TestConsoleKeepsEachRanksOrder(t *testing.T) {
	ct := newConsoleTest(t, Options{})
	for r := range 6 {
		ct.c.Line(Source{Rank: r, PID: 100 + r}, "same line 1")
		ct.c.Line(Source{Rank: r, PID: 100 + r}, fmt.Sprintf("unique from %d", r))
	}
	ct.c.Close()
	want := []string{
		"[rank 0 pid 100] same line 1",
		"[rank 0 pid 100] unique from 0",
		"[ranks 1-5] same line 1 [repeated 5x across workers]",
		"[rank 1 pid 101] unique from 1",
		"[rank 2 pid 102] unique from 2",
		"[rank 3 pid 103] unique from 3",
		"[rank 4 pid 104] unique from 4",
		"[rank 5 pid 105] unique from 5",
	}
	if diff := cmp.Diff(want, ct.lines()); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// With two ranks a copy folded alone would save nothing: it is written as its rank's own
// line, never as "[rank 1] ... [repeated 1x across workers]"; two ranks whose lines both
// wait still fold.
func TestConsoleTwoRanks(t *testing.T) {
	ct := newConsoleTest(t, Options{})
	for i := range 3 {
		for r := range 2 {
			ct.c.Line(Source{Rank: r, PID: 100 + r}, fmt.Sprintf("epoch %d", i))
		}
	}
	ct.c.Close()
	want := []string{
		"[rank 0 pid 100] epoch 0", "[rank 0 pid 100] epoch 1", "[rank 0 pid 100] epoch 2",
		"[rank 1 pid 101] epoch 0", "[rank 1 pid 101] epoch 1", "[rank 1 pid 101] epoch 2",
	}
	if diff := cmp.Diff(want, ct.lines()); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// Options.Ranks shows the chosen ranks only, and folds among them; notices are always
// shown.
func TestConsoleRanksFilter(t *testing.T) {
	keep, err := ParseRanks("0,2-3")
	if err != nil {
		t.Fatal(err)
	}
	ct := newConsoleTest(t, Options{Ranks: keep})
	for r := range 5 {
		ct.c.Line(Source{Rank: r, PID: 100 + r}, "hello")
		ct.c.Line(Source{Rank: r, PID: 100 + r}, fmt.Sprintf("from %d", r))
	}
	ct.c.Notice("done")
	want := []string{
		"[rank 0 pid 100] hello",
		"[rank 0 pid 100] from 0",
		"[ranks 2-3] hello [repeated 2x across workers]",
		"[rank 2 pid 102] from 2",
		"[rank 3 pid 103] from 3",
		"trainyard: done",
	}
	if diff := cmp.Diff(want, ct.lines()); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// The order property: whatever the interleaving of the ranks' lines, the flushes and the
// clock, each rank's lines reach the console once each, in the order it printed them, and
// folding never adds lines (a summary stands for two copies or more). Lines are drawn
// from a few texts, so that they fold, with now and then one too long to fold.
func TestConsoleOrderProperty(t *testing.T) {
	texts := []string{"a", "b", "c", "epoch done", strings.Repeat("L", maxFoldedLine+1)}
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 42))
		ranks := 1 + rng.IntN(6)
		scripts := make([][]string, ranks)
		for r := range scripts {
			for range rng.IntN(12) {
				i := rng.IntN(len(texts) + 2)
				if i >= len(texts) {
					scripts[r] = append(scripts[r], fmt.Sprintf("own %d of %d", len(scripts[r]), r))
					continue
				}
				if i == len(texts)-1 && rng.IntN(4) != 0 {
					i = 0 // long lines now and then only
				}
				scripts[r] = append(scripts[r], texts[i])
			}
		}
		ct := newConsoleTest(t, Options{Window: time.Second})
		next := make([]int, ranks)
		total := 0
		for left := true; left; {
			left = false
			switch rng.IntN(10) {
			case 0:
				ct.clock.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			case 1:
				ct.c.Flush(false)
			}
			r := rng.IntN(ranks)
			if next[r] < len(scripts[r]) {
				ct.c.Line(Source{Rank: r, PID: 100 + r}, scripts[r][next[r]])
				next[r]++
				total++
			}
			for r := range ranks {
				left = left || next[r] < len(scripts[r])
			}
		}
		ct.c.Close()
		lines := ct.lines()
		got := perRank(t, lines)
		for r := range ranks {
			if diff := cmp.Diff(scripts[r], got[r], cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("seed %d: rank %d's lines (-printed +shown):\n%s\nconsole:\n%s", seed, r, diff, strings.Join(lines, "\n"))
			}
		}
		if len(lines) > total {
			t.Fatalf("seed %d: %d lines shown for %d printed", seed, len(lines), total)
		}
	}
}

// Options.Log gets every line as it comes, prefixed, plain, neither folded nor
// filtered, and the notices.
func TestConsoleLog(t *testing.T) {
	keep, _ := ParseRanks("0")
	var log bytes.Buffer
	ct := newConsoleTest(t, Options{Ranks: keep, Color: true, Log: &log})
	ct.c.Line(Source{Rank: 0, PID: 100}, "x")
	ct.c.Line(Source{Rank: 1, PID: 101}, "x")
	ct.c.Line(Source{Rank: 2, PID: 102}, "x")
	ct.c.Notice("done")
	want := "[rank 0 pid 100] x\n[rank 1 pid 101] x\n[rank 2 pid 102] x\ntrainyard: done\n"
	if diff := cmp.Diff(want, log.String()); diff != "" {
		t.Errorf("log mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"\x1b[36m[rank 0 pid 100]\x1b[0m x", "\x1b[1mtrainyard:\x1b[0m done"}, ct.lines()); diff != "" {
		t.Errorf("console mismatch (-want +got):\n%s", diff)
	}
}
