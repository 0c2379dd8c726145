package logstream

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultWindow is how long a console line waits for identical lines from other ranks.
const DefaultWindow = 500 * time.Millisecond

// colors cycle over ranks when the console is a terminal.
var colors = []string{"36", "33", "32", "35", "34", "91", "96", "93"}

// Console writes worker lines to a terminal or log, prefixed "[rank N pid P] ". The first
// copy of a line is written at once; further identical lines from other ranks within the
// window are counted instead, and written later as one line ending
// "[repeated Nx across workers]". Lines a rank repeats itself are never folded.
//
// Methods are safe for concurrent use. Close flushes what is pending.
type Console struct {
	w      io.Writer
	color  bool
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	pending map[string]*folded
	order   []string // texts in pending, oldest first
	stop    chan struct{}
	done    chan struct{}
}

type folded struct {
	first   Source
	ranks   map[int]bool
	repeats int
	since   time.Time
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
}

// NewConsole returns a Console writing to w. It starts a goroutine that writes folded
// summaries as their windows end; Close stops it.
func NewConsole(w io.Writer, opts Options) *Console {
	c := &Console{w: w, color: opts.Color, window: opts.Window, now: opts.Now,
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

// Line writes one line (without its newline) from src.
func (c *Console) Line(src Source, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.window < 0 {
		c.write(src, text, 0)
		return
	}
	if f, ok := c.pending[text]; ok && !f.ranks[src.Rank] {
		f.ranks[src.Rank] = true
		f.repeats++
		return
	}
	if _, ok := c.pending[text]; !ok {
		c.pending[text] = &folded{first: src, ranks: map[int]bool{src.Rank: true}, since: c.now()}
		c.order = append(c.order, text)
	}
	c.write(src, text, 0)
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
		if f.repeats > 0 {
			c.write(f.first, text, f.repeats)
		}
		delete(c.pending, text)
	}
	c.order = keep
}

// Close writes what is pending and stops the background flush.
func (c *Console) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
		<-c.done
	}
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

// write writes one prefixed line; repeats > 0 adds the fold suffix. c.mu is held.
func (c *Console) write(src Source, text string, repeats int) {
	prefix := fmt.Sprintf("[rank %d pid %d]", src.Rank, src.PID)
	suffix := ""
	if repeats > 0 {
		suffix = fmt.Sprintf(" [repeated %dx across workers]", repeats)
	}
	if c.color {
		col := colors[src.Rank%len(colors)]
		prefix = "\x1b[" + col + "m" + prefix + "\x1b[0m"
		if suffix != "" {
			suffix = "\x1b[2m" + suffix + "\x1b[0m"
		}
	}
	fmt.Fprintf(c.w, "%s %s%s\n", prefix, text, suffix)
}
