package logstream

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultWindow is how long a console line waits for identical lines from other ranks.
const DefaultWindow = 500 * time.Millisecond

// Folding keeps the text of every line printed within the window, so it is bounded: lines
// longer than maxFoldedLine are never folded, and when the texts waiting take more than
// maxPendingBytes (counting foldCost for each besides its length) the oldest fold ends
// early.
const (
	maxFoldedLine   = 4 << 10
	maxPendingBytes = 2 << 20
	foldCost        = 128
)

// colors cycle over ranks when the console is a terminal.
var colors = []string{"36", "33", "32", "35", "34", "91", "96", "93"}

// Console writes worker lines to a terminal or log, prefixed "[rank N pid P] ". The first
// copy of a line is written at once; further identical lines from other ranks within the
// window are counted instead, and written later as one line such as
// "[ranks 1-3] text [repeated 3x across workers]". Lines a rank repeats itself are never
// folded.
//
// Methods are safe for concurrent use. Close flushes what is pending.
type Console struct {
	w      io.Writer
	color  bool
	pass   bool // Options.PassPrefixed
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	pending map[string]*folded
	order   []string // texts in pending, oldest first
	// pendingBytes counts the texts in pending, and foldCost for each.
	pendingBytes int
	stop         chan struct{}
	done         chan struct{}
	closing      sync.Once
}

type folded struct {
	ranks    map[int]bool
	repeated []int // ranks whose copies were folded, in arrival order
	since    time.Time
}

// Source identifies the process a line came from.
type Source struct {
	Rank int
	PID  int
}

// Options tune a Console; the zero value writes plain text and folds over DefaultWindow.
type Options struct {
	Color  bool
	Window time.Duration // 0: DefaultWindow; negative: never fold
	Now    func() time.Time
	// PassPrefixed writes a line that already starts with a rank prefix ("[rank ",
	// "[ranks ") or "trainyard: " as it is: the console of a gang this run's one process
	// launched itself (a Ray Train driver's fit()), whose lines would otherwise carry two
	// prefixes.
	PassPrefixed bool
}

// NewConsole returns a Console writing to w. It starts a goroutine that writes folded
// summaries as their windows end; Close stops it.
func NewConsole(w io.Writer, opts Options) *Console {
	c := &Console{w: w, color: opts.Color, pass: opts.PassPrefixed, window: opts.Window, now: opts.Now,
		pending: map[string]*folded{}, stop: make(chan struct{}), done: make(chan struct{})}
	if c.window == 0 {
		c.window = DefaultWindow
	}
	if c.now == nil {
		c.now = time.Now
	}
	go c.flushLoop()
	return c
}

// Line writes one line (without its newline) from src. A line longer than 4 KiB is never
// folded.
func (c *Console) Line(src Source, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pass && prefixed(text) {
		fmt.Fprintf(c.w, "%s\n", text)
		return
	}
	if c.window < 0 || len(text) > maxFoldedLine {
		c.write(src, text)
		return
	}
	if f, ok := c.pending[text]; ok && !f.ranks[src.Rank] {
		f.ranks[src.Rank] = true
		f.repeated = append(f.repeated, src.Rank)
		return
	}
	if _, ok := c.pending[text]; !ok {
		for c.pendingBytes+len(text)+foldCost > maxPendingBytes {
			c.endOldest()
		}
		c.pendingBytes += len(text) + foldCost
		c.pending[text] = &folded{ranks: map[int]bool{src.Rank: true}, since: c.now()}
		c.order = append(c.order, text)
	}
	c.write(src, text)
}

// prefixed reports whether a line comes from another trainyard's console.
func prefixed(text string) bool {
	return strings.HasPrefix(text, "[rank ") || strings.HasPrefix(text, "[ranks ") || strings.HasPrefix(text, "trainyard: ")
}

// Notice writes a line of Trainyard's own, outside any rank.
func (c *Console) Notice(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.color {
		fmt.Fprintf(c.w, "\x1b[1mtrainyard:\x1b[0m %s\n", text)
		return
	}
	fmt.Fprintf(c.w, "trainyard: %s\n", text)
}

// Flush writes the summaries of folds whose window has ended by now; with all set, of
// every fold.
func (c *Console) Flush(all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	keep := c.order[:0]
	for _, text := range c.order {
		f := c.pending[text]
		if !all && now.Sub(f.since) < c.window {
			keep = append(keep, text)
			continue
		}
		if len(f.repeated) > 0 {
			c.writeFolded(f.repeated, text)
		}
		c.forget(text)
	}
	c.order = keep
}

// endOldest writes the summary of the oldest fold now and forgets it. c.mu is held.
func (c *Console) endOldest() {
	text := c.order[0]
	if f := c.pending[text]; len(f.repeated) > 0 {
		c.writeFolded(f.repeated, text)
	}
	c.forget(text)
	c.order = slices.Delete(c.order, 0, 1)
}

// forget drops a fold from pending (not from order). c.mu is held.
func (c *Console) forget(text string) {
	delete(c.pending, text)
	c.pendingBytes -= len(text) + foldCost
}

// Close writes what is pending and stops the background flush.
func (c *Console) Close() {
	// Once, not a select on stop: two Close calls at the same time would both close it.
	c.closing.Do(func() {
		close(c.stop)
		<-c.done
	})
	c.Flush(true)
}

func (c *Console) flushLoop() {
	defer close(c.done)
	if c.window < 0 {
		<-c.stop
		return
	}
	t := time.NewTicker(c.window / 4)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.Flush(false)
		}
	}
}

// write writes one line of a rank. c.mu is held.
func (c *Console) write(src Source, text string) {
	prefix := fmt.Sprintf("[rank %d pid %d]", src.Rank, src.PID)
	fmt.Fprintf(c.w, "%s %s\n", c.paint(src.Rank, prefix), text)
}

// writeFolded writes the summary of the copies of text that ranks printed. c.mu is held.
func (c *Console) writeFolded(ranks []int, text string) {
	prefix := "[" + rankList(ranks) + "]"
	suffix := fmt.Sprintf(" [repeated %dx across workers]", len(ranks))
	if c.color {
		suffix = "\x1b[2m" + suffix + "\x1b[0m"
	}
	fmt.Fprintf(c.w, "%s %s%s\n", c.paint(ranks[0], prefix), text, suffix)
}

// paint colours a prefix by rank when the console is a terminal.
func (c *Console) paint(rank int, prefix string) string {
	if !c.color {
		return prefix
	}
	return "\x1b[" + colors[rank%len(colors)] + "m" + prefix + "\x1b[0m"
}

// rankList names ranks compactly: "rank 3", "ranks 1-3", "ranks 1,4,7".
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	sorted := slices.Sorted(slices.Values(ranks))
	if sorted[len(sorted)-1]-sorted[0] == len(sorted)-1 {
		return fmt.Sprintf("ranks %d-%d", sorted[0], sorted[len(sorted)-1])
	}
	parts := make([]string, len(sorted))
	for i, r := range sorted {
		parts[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(parts, ",")
}
