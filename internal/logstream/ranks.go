package logstream

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Ranks is a set of ranks, such as "0,2-3" names (torchrun's --local-ranks-filter). The
// zero value is empty, and an empty set stands for every rank.
type Ranks struct {
	set map[int]bool
}

// ParseRanks reads a comma-separated list of ranks and ranges: "0", "0,2-3", "4-7". An
// empty string is every rank.
func ParseRanks(s string) (Ranks, error) {
	r := Ranks{}
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	r.set = map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := strconv.Atoi(lo)
		to := from
		if err == nil && isRange {
			to, err = strconv.Atoi(hi)
		}
		if err != nil || from < 0 || to < from {
			return Ranks{}, fmt.Errorf("ranks %q: %q is not a rank (0, 1, ...) or a range of ranks (2-5)", s, part)
		}
		if to-from >= 1<<16 {
			return Ranks{}, fmt.Errorf("ranks %q: the range %q is too long", s, part)
		}
		for i := from; i <= to; i++ {
			r.set[i] = true
		}
	}
	return r, nil
}

// All reports whether r stands for every rank.
func (r Ranks) All() bool { return len(r.set) == 0 }

// Has reports whether rank is in r (always, when r stands for every rank).
func (r Ranks) Has(rank int) bool { return r.All() || r.set[rank] }

// String writes r back as ParseRanks reads it: "0,2-3"; "" for every rank.
func (r Ranks) String() string {
	if r.All() {
		return ""
	}
	return strings.TrimPrefix(strings.TrimPrefix(rankList(slices.Sorted(maps.Keys(r.set))), "ranks "), "rank ")
}

// LineRanks reads the ranks a console line names in its prefix: "[rank 3 pid 42] ..."
// and "[rank 3] ..." name rank 3, a summary "[ranks 1-3] ..." or "[ranks 1,4] ..." the
// ranks it folds. ok is false for a line without such a prefix (Trainyard's own lines).
func LineRanks(line string) (ranks []int, ok bool) {
	line = stripColor(line)
	var list string
	switch {
	case strings.HasPrefix(line, "[rank "):
		list = line[len("[rank "):]
	case strings.HasPrefix(line, "[ranks "):
		list = line[len("[ranks "):]
	default:
		return nil, false
	}
	end := strings.IndexAny(list, " ]")
	if end < 0 {
		return nil, false
	}
	list = list[:end]
	set, err := ParseRanks(list)
	if err != nil || set.All() {
		return nil, false
	}
	return slices.Sorted(maps.Keys(set.set)), true
}

// stripColor drops the ANSI colour a terminal console puts before a line's prefix.
func stripColor(line string) string {
	if strings.HasPrefix(line, "\x1b[") {
		if i := strings.IndexByte(line, 'm'); i > 0 {
			return line[i+1:]
		}
	}
	return line
}

// FilterLines returns a writer that passes to w the whole lines of a console log that
// name a rank of keep in their prefix (a summary when it names one of them), and every
// line without a rank prefix (Trainyard's own); a last line without a newline waits for
// its end (Close writes it). With keep standing for every rank, it is w itself.
func FilterLines(w io.Writer, keep Ranks) io.WriteCloser {
	if keep.All() {
		return nopCloser{w}
	}
	return &lineFilter{w: w, keep: keep}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type lineFilter struct {
	w    io.Writer
	keep Ranks
	part []byte // a line not ended yet, up to MaxLine bytes
	drop bool   // the line being read is dropped: it was too long to hold, and not kept
	pass bool   // the line being read is passed on as it comes: too long to hold, kept
}

func (f *lineFilter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i+1]
		}
		p = p[len(chunk):]
		if err := f.take(chunk, i >= 0); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// take handles a piece of a line; ended says whether it ends the line.
func (f *lineFilter) take(chunk []byte, ended bool) error {
	var err error
	switch {
	case f.pass:
		_, err = f.w.Write(chunk)
	case f.drop:
	case len(f.part)+len(chunk) > MaxLine: // decide on what is held
		f.part = append(f.part, chunk...)
		if f.kept(f.part) {
			f.pass = true
			_, err = f.w.Write(f.part)
		} else {
			f.drop = true
		}
		f.part = f.part[:0]
	default:
		f.part = append(f.part, chunk...)
		if ended {
			if f.kept(f.part) {
				_, err = f.w.Write(f.part)
			}
			f.part = f.part[:0]
		}
	}
	if ended {
		f.pass, f.drop = false, false
	}
	return err
}

func (f *lineFilter) kept(line []byte) bool {
	ranks, ok := LineRanks(string(line[:min(len(line), 256)]))
	if !ok {
		return true
	}
	return slices.ContainsFunc(ranks, f.keep.Has)
}

// Close writes a last line that did not end, if it is kept.
func (f *lineFilter) Close() error {
	if len(f.part) == 0 || !f.kept(f.part) {
		return nil
	}
	_, err := f.w.Write(f.part)
	f.part = f.part[:0]
	return err
}
