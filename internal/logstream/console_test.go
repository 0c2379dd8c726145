package logstream

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
			want: []string{"[rank 0 pid 100] x", "[rank 1] x [repeated 1x across workers]"},
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
				"[rank 1 pid 101] x",
				"[ranks 1-2] x [repeated 2x across workers]",
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
				"[rank 1] x [repeated 1x across workers]",
				"[rank 2 pid 102] x",
				"[rank 3] x [repeated 1x across workers]",
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
				printed("[rank 0 pid 100] old", "[rank 0 pid 100] new", "[rank 1] old [repeated 1x across workers]"),
				after(window / 2),
				flush(),
			},
			want: []string{
				"[rank 0 pid 100] old",
				"[rank 0 pid 100] new",
				"[rank 1] old [repeated 1x across workers]",
				"[rank 1] new [repeated 1x across workers]",
			},
		},
		"Flush(true) writes every fold, oldest first": {
			steps: []step{line(0, 100, "a"), line(0, 100, "b"), line(1, 101, "b"), line(1, 101, "a"), line(2, 102, "a"), flushAll()},
			want: []string{
				"[rank 0 pid 100] a",
				"[rank 0 pid 100] b",
				"[ranks 1-2] a [repeated 2x across workers]",
				"[rank 1] b [repeated 1x across workers]",
			},
		},
		"Close writes what is pending": {
			steps: []step{line(0, 100, "bye"), line(1, 101, "bye"), line(2, 102, "bye"), closeConsole()},
			want:  []string{"[rank 0 pid 100] bye", "[ranks 1-2] bye [repeated 2x across workers]"},
		},
		"Close twice writes the summary once": {
			steps: []step{line(0, 100, "bye"), line(1, 101, "bye"), closeConsole(), closeConsole()},
			want:  []string{"[rank 0 pid 100] bye", "[rank 1] bye [repeated 1x across workers]"},
		},
		"a negative Window disables folding": {
			opts:  Options{Window: -1},
			steps: []step{line(0, 100, "x"), line(1, 101, "x"), line(2, 102, "x"), after(window), flush(), closeConsole()},
			want:  []string{"[rank 0 pid 100] x", "[rank 1 pid 101] x", "[rank 2 pid 102] x"},
		},
		"empty lines fold like any other": {
			steps: []step{line(0, 100, ""), line(1, 101, ""), flushAll()},
			want:  []string{"[rank 0 pid 100] ", "[rank 1]  [repeated 1x across workers]"},
		},
		"Notice is Trainyard's own line, outside folding": {
			steps: []step{line(0, 100, "x"), notice("rank 1 exited with status 1; restarting the gang (attempt 2 of 4)"), line(1, 101, "x"), flushAll()},
			want: []string{
				"[rank 0 pid 100] x",
				"trainyard: rank 1 exited with status 1; restarting the gang (attempt 2 of 4)",
				"[rank 1] x [repeated 1x across workers]",
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
				"\x1b[1mtrainyard:\x1b[0m done",
				// The summary takes the colour of the first rank folded (9, like 1).
				"\x1b[33m[ranks 9-10]\x1b[0m x\x1b[2m [repeated 2x across workers]\x1b[0m",
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
				"trainyard: done",
				"[rank 1] x [repeated 1x across workers]",
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
	if diff := cmp.Diff("[rank 0 pid 100] x\n[rank 1] x [repeated 1x across workers]\n", out.String()); diff != "" {
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
	want := "[rank 0 pid 100] x\n[rank 1] x [repeated 1x across workers]\n"
	deadline := time.Now().Add(10 * time.Second)
	for out.String() != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// Many ranks writing at once: every rank's own lines come out once each; every shared
// line once, from one rank, plus one summary naming the seven other ranks. Run with -race;
// the buffer is not synchronized, so the Console must serialize its writes.
func TestConsoleConcurrentLines(t *testing.T) {
	const ranks, steps = 8, 200
	ct := newConsoleTest(t, Options{})
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() {
			for i := range steps {
				ct.c.Line(Source{Rank: r, PID: 1000 + r}, fmt.Sprintf("rank %d says %d", r, i))
				ct.c.Line(Source{Rank: r, PID: 1000 + r}, fmt.Sprintf("step %d done", i))
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

	counts := map[string]int{}
	ranksOf := map[string][]int{} // shared text -> the first rank, then the folded ones
	for _, l := range ct.lines() {
		var rank, pid, n, step int
		var list string
		switch {
		case strings.HasPrefix(l, "trainyard: notice "):
			counts["notice"]++
		case scan(l, "[rank %d pid %d] rank %d says %d", &rank, &pid, &n, &step) && rank == n && pid == 1000+rank:
			counts["own"]++
		case scan(l, "[rank %d pid %d] step %d done", &rank, &pid, &step) && pid == 1000+rank:
			counts["first copy"]++
			text := fmt.Sprintf("step %d done", step)
			if len(ranksOf[text]) > 0 {
				t.Errorf("%q: first copy after its summary", l)
			}
			ranksOf[text] = append([]int{rank}, ranksOf[text]...)
		case scan(l, "[ranks %s step %d done [repeated 7x across workers]", &list, &step):
			counts["summary"]++
			text := fmt.Sprintf("step %d done", step)
			ranksOf[text] = append(ranksOf[text], parseRanks(t, strings.TrimSuffix(list, "]"))...)
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	want := map[string]int{"own": ranks * steps, "first copy": steps, "summary": steps, "notice": steps}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("line counts mismatch (-want +got):\n%s", diff)
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for text, rs := range ranksOf {
		if diff := cmp.Diff(all, slices.Sorted(slices.Values(rs))); diff != "" {
			t.Errorf("%q: first rank and folded ranks are not every rank once (-want +got):\n%s", text, diff)
		}
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
		if diff := cmp.Diff("[rank 0 pid 100] x\n[rank 1] x [repeated 1x across workers]\n", out.String()); diff != "" {
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
