package logstream

import (
	"cmp"
	"fmt"
	"io"
	"math"
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

// Console writes worker lines to a terminal or log, prefixed "[rank N pid P] ". Identical
// lines that several ranks print within the window are folded into one line such as
// "[ranks 1-3] text [repeated 3x across workers]", but only where that saves lines: a
// copy that would be summarised alone is written as its rank's own line. Each rank's
// lines keep their order: while a rank's copy of a line waits to be folded, the rank's
// later lines wait behind it, never longer than the window. A line nobody waits for is
// written at once. Lines a rank repeats itself are never folded.
//
// Methods are safe for concurrent use. Close flushes what is pending.
type Console struct {
	w      io.Writer
	log    io.Writer // Options.Log
	color  bool
	pass   bool // Options.PassPrefixed
	window time.Duration
	now    func() time.Time
	show   Ranks // Options.Ranks

	mu sync.Mutex
	// queue holds the lines that wait, in the order they will be written (by seq): folds
	// whose window has not ended, and the lines of ranks held behind them.
	queue []*entry
	// byText holds the foldable entries of queue by their text, in queue order.
	byText map[string][]*entry
	// held is, for each rank with a line in queue, the last entry holding one.
	held map[int]*entry
	// pendingBytes counts the texts in queue, and foldCost for each.
	pendingBytes int
	stop         chan struct{}
	done         chan struct{}
	closing      sync.Once
}

// entry is a line in the console's queue: the copies of one text that ranks printed and
// that are still to be written, besides a first copy written when the entry was made.
type entry struct {
	seq      uint64 // increasing along the queue, with gaps to insert into (see seqGap)
	text     string
	since    time.Time
	first    bool     // a copy was written when the entry was made, of rank firstOf
	firstOf  int      //
	copies   []Source // the copies to write, in arrival order, one per rank
	foldable bool     // other ranks' copies may join
}

// seqGap separates the seqs of entries appended to the queue, so that lines can be
// inserted between them; when no room is left the queue is numbered again.
const seqGap = 1 << 20

func (e *entry) has(rank int) bool {
	if e.first && e.firstOf == rank {
		return true
	}
	for _, s := range e.copies {
		if s.Rank == rank {
			return true
		}
	}
	return false
}

// Source identifies the process a line came from.
type Source struct {
	Rank int
	PID  int
}

// Options tune a Console; the zero value writes plain text, every rank's lines, and folds
// over DefaultWindow.
type Options struct {
	Color  bool
	Window time.Duration // 0: DefaultWindow; negative: never fold
	Now    func() time.Time
	// PassPrefixed writes a line that already starts with a rank prefix ("[rank ",
	// "[ranks ") or "trainyard: " as it is: the console of a gang this run's one process
	// launched itself (a Ray Train driver's fit()), whose lines would otherwise carry two
	// prefixes.
	PassPrefixed bool
	// Ranks, when not empty, are the only ranks whose lines are written (torchrun's
	// --local-ranks-filter); Trainyard's notices are always written.
	Ranks Ranks
	// Log, when set, gets every line as it comes, prefixed, in plain text, never folded
	// nor filtered: the run's console log.
	Log io.Writer
}

// NewConsole returns a Console writing to w. It starts a goroutine that writes folded
// summaries as their windows end; Close stops it.
func NewConsole(w io.Writer, opts Options) *Console {
	c := &Console{w: w, log: opts.Log, color: opts.Color, pass: opts.PassPrefixed, window: opts.Window, now: opts.Now,
		show: opts.Ranks, byText: map[string][]*entry{}, held: map[int]*entry{},
		stop: make(chan struct{}), done: make(chan struct{})}
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
	passed := c.pass && prefixed(text)
	if c.log != nil {
		if passed {
			fmt.Fprintf(c.log, "%s\n", text)
		} else {
			fmt.Fprintf(c.log, "[rank %d pid %d] %s\n", src.Rank, src.PID, text)
		}
	}
	if !c.show.Has(src.Rank) {
		return
	}
	if passed {
		fmt.Fprintf(c.w, "%s\n", text)
		return
	}
	if c.window < 0 {
		c.write(src, text)
		return
	}
	foldable := len(text) <= maxFoldedLine
	held := c.held[src.Rank] // nil: none of the rank's lines waits
	if foldable {
		if e := c.foldInto(src.Rank, text, held); e != nil {
			e.copies = append(e.copies, src)
			c.held[src.Rank] = e
			return
		}
	}
	if held == nil {
		c.write(src, text)
		if foldable {
			c.insert(&entry{text: text, first: true, firstOf: src.Rank, foldable: true}, nil)
		}
		return
	}
	// Soon behind the rank's last waiting line, not at the end of the queue: its next
	// lines may then still join folds already waiting.
	c.held[src.Rank] = c.insert(&entry{text: text, copies: []Source{src}, foldable: foldable}, held)
}

// foldInto returns the entry that rank's copy of text joins, or nil: the oldest waiting
// entry of that text that rank is not in and that is written after every line of rank
// that waits (held); else the newest entry of that text, moved behind held, when no rank
// in it has a later line waiting. c.mu is held.
func (c *Console) foldInto(rank int, text string, held *entry) *entry {
	same := c.byText[text]
	for _, e := range same {
		if (held == nil || e.seq > held.seq) && !e.has(rank) {
			return e
		}
	}
	if len(same) == 0 {
		return nil
	}
	e := same[len(same)-1]
	if e.has(rank) {
		return nil
	}
	for _, s := range e.copies {
		if c.held[s.Rank] != e {
			return nil
		}
	}
	c.remove(e)
	return c.insert(e, held)
}

// insert puts e into the queue after the entry after (and the lines held like it that
// follow), or at the end when after is nil, first writing the oldest entries while the queue would hold more than
// maxPendingBytes. An entry that is new starts its window now. c.mu is held.
func (c *Console) insert(e *entry, after *entry) *entry {
	if e.since.IsZero() {
		for len(c.queue) > 0 && c.pendingBytes+len(e.text)+foldCost > maxPendingBytes {
			c.endOldest()
		}
		e.since = c.now()
		if !e.foldable {
			e.since = e.since.Add(-c.window) // nothing joins it: due once it is the oldest
		}
		c.pendingBytes += len(e.text) + foldCost
	}
	i := len(c.queue)
	if after != nil {
		// After was written meanwhile (to bound the queue) when it is not found: then
		// nothing needs to come first.
		j, found := slices.BinarySearchFunc(c.queue, after.seq, bySeq)
		i = 0
		if found {
			i = j + 1
		}
		// Behind the lines of other ranks that waited too, so that they keep the order
		// they came in; not behind a line written once already, which the rank's next
		// line may join.
		for i < len(c.queue) && !c.queue[i].first {
			i++
		}
	}
	if !c.seqAt(i, e) {
		c.renumber()
		c.seqAt(i, e)
	}
	c.queue = slices.Insert(c.queue, i, e)
	if e.foldable {
		same := c.byText[e.text]
		j, _ := slices.BinarySearchFunc(same, e.seq, bySeq)
		c.byText[e.text] = slices.Insert(same, j, e)
	}
	return e
}

// seqAt gives e a seq between those of the entries at i-1 and i of the queue, and
// reports whether there was room for one. c.mu is held.
func (c *Console) seqAt(i int, e *entry) bool {
	var lo, hi uint64 = 0, math.MaxUint64
	if i > 0 {
		lo = c.queue[i-1].seq
	}
	if i < len(c.queue) {
		hi = c.queue[i].seq
	}
	switch {
	case i == len(c.queue) && lo <= math.MaxUint64/2:
		e.seq = lo + seqGap
	case hi-lo >= 2 && i < len(c.queue):
		e.seq = lo + (hi-lo)/2
	default:
		return false
	}
	return true
}

// renumber spaces the seqs of the queue seqGap apart, keeping their order. c.mu is held.
func (c *Console) renumber() {
	for i, e := range c.queue {
		e.seq = uint64(i+1) * seqGap
	}
}

// index returns the position of e in the queue. c.mu is held.
func (c *Console) index(e *entry) int {
	i, _ := slices.BinarySearchFunc(c.queue, e.seq, bySeq)
	return i
}

func bySeq(e *entry, seq uint64) int { return cmp.Compare(e.seq, seq) }

// remove takes e out of the queue and byText (not out of held). c.mu is held.
func (c *Console) remove(e *entry) {
	i := c.index(e)
	c.queue = slices.Delete(c.queue, i, i+1)
	if e.foldable {
		same := c.byText[e.text]
		if j, ok := slices.BinarySearchFunc(same, e.seq, bySeq); ok {
			same = slices.Delete(same, j, j+1)
		}
		if len(same) == 0 {
			delete(c.byText, e.text)
		} else {
			c.byText[e.text] = same
		}
	}
}

// prefixed reports whether a line comes from another trainyard's console.
func prefixed(text string) bool {
	return strings.HasPrefix(text, "[rank ") || strings.HasPrefix(text, "[ranks ") || strings.HasPrefix(text, "trainyard: ")
}

// Notice writes a line of Trainyard's own, outside any rank, after every line waiting.
func (c *Console) Notice(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) > 0 {
		c.endOldest()
	}
	if c.log != nil {
		fmt.Fprintf(c.log, "trainyard: %s\n", text)
	}
	if c.color {
		fmt.Fprintf(c.w, "\x1b[1mtrainyard:\x1b[0m %s\n", text)
		return
	}
	fmt.Fprintf(c.w, "trainyard: %s\n", text)
}

// Flush writes the queued lines whose window has ended by now, oldest first; with all
// set, every queued line.
func (c *Console) Flush(all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for len(c.queue) > 0 && (all || now.Sub(c.queue[0].since) >= c.window) {
		c.endOldest()
	}
}

// endOldest writes the oldest entry of the queue now and forgets it: the copies waiting
// in it as one summary when there are two or more (which saves lines), else the one
// copy as its rank's own line. c.mu is held.
func (c *Console) endOldest() {
	e := c.queue[0]
	c.remove(e)
	switch len(e.copies) {
	case 0:
	case 1:
		c.write(e.copies[0], e.text)
	default:
		ranks := make([]int, len(e.copies))
		for i, s := range e.copies {
			ranks[i] = s.Rank
		}
		c.writeFolded(ranks, e.text)
	}
	for _, s := range e.copies {
		if c.held[s.Rank] == e {
			delete(c.held, s.Rank)
		}
	}
	c.pendingBytes -= len(e.text) + foldCost
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
