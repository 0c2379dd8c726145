package logstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxLine is the longest stretch of output Copy holds in memory: a line (or a progress
// bar's update, see Copy) that grows past it reaches the console in pieces of MaxLine
// bytes, the first marked with SplitMarker. The log file gets the bytes as written.
const MaxLine = 64 << 10

// SplitMarker follows the first piece of a line that Copy split for the console.
const SplitMarker = "[line split: longer than 64 KiB; the rank's log file has it whole]"

// ProgressEvery is how often, at most, the console shows a rank's progress bar (a line
// redrawn with carriage returns) while it is still being redrawn.
const ProgressEvery = 10 * time.Second

// Copy reads r until EOF, writing every byte to file (when not nil) as it was written,
// and lines to the console (when not nil) without their line endings. A last line
// without a newline is shown too. The first write error to file is returned after r is
// drained, so a full disk never blocks the worker.
//
// The console shows what a terminal would have kept of a line redrawn with carriage
// returns, as progress bars such as tqdm draw themselves: its last update once the line
// ends. While such a line is being redrawn, an update is shown at once if none was shown
// for ProgressEvery, so a progress bar shows its start and then moves every ten seconds
// rather than flooding the console. Memory stays bounded whatever the worker writes:
// see MaxLine.
func Copy(r io.Reader, src Source, file io.Writer, console *Console) error {
	buf := make([]byte, MaxLine)
	var (
		fileErr error
		line    *consoleLine
	)
	if console != nil {
		line = &consoleLine{c: console, src: src}
	}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if file != nil && fileErr == nil {
				if werr := writeLines(file, buf[:n]); werr != nil {
					fileErr = fmt.Errorf("write log of rank %d: %w", src.Rank, werr)
				}
			}
			if line != nil {
				line.write(buf[:n])
			}
		}
		if err == nil {
			continue
		}
		if line != nil && line.open {
			line.end() // the last line, without a newline
		}
		if errors.Is(err, io.EOF) {
			return fileErr
		}
		return errors.Join(fmt.Errorf("read output of rank %d: %w", src.Rank, err), fileErr)
	}
}

// writeLines writes p to w a line at a time, so that a log file's reader sees whole lines
// as soon as the worker wrote them.
func writeLines(w io.Writer, p []byte) error {
	for len(p) > 0 {
		n := len(p)
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			n = i + 1
		}
		if _, err := w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// consoleLine turns one rank's output into console lines, holding at most two pieces of
// MaxLine bytes: the update being read and the last complete one.
type consoleLine struct {
	c   *Console
	src Source

	open     bool      // bytes of a line were read, and the line has not ended
	cur      []byte    // the update being read: the bytes since the last \r or \n
	prev     []byte    // the last complete non-empty update of the line
	prevSeen bool      // prev was shown already
	any      bool      // something of the line was shown (a piece, or an update)
	split    bool      // the line was split, and SplitMarker shown
	shownAt  time.Time // when an update of a redrawn line was last shown
}

// write takes bytes of output, as read.
func (l *consoleLine) write(p []byte) {
	for len(p) > 0 {
		l.open = true
		i := indexLineBreak(p)
		if i < 0 {
			l.add(p)
			return
		}
		l.add(p[:i])
		if p[i] == '\n' {
			l.end()
		} else {
			l.carriageReturn()
		}
		p = p[i+1:]
	}
}

// indexLineBreak returns the index of the first \r or \n in p, or -1.
func indexLineBreak(p []byte) int {
	return bytes.IndexAny(p, "\r\n")
}

// add appends bytes of the current update, showing a piece of it whenever it reaches
// MaxLine.
func (l *consoleLine) add(p []byte) {
	for len(p) > 0 {
		n := min(len(p), MaxLine-len(l.cur))
		l.cur = append(l.cur, p[:n]...)
		p = p[n:]
		if len(l.cur) == MaxLine {
			l.showPiece()
		}
	}
}

// showPiece shows the current update's first MaxLine bytes, less a UTF-8 sequence cut at
// its end, which stays for the next piece.
func (l *consoleLine) showPiece() {
	cut := RuneBoundary(l.cur)
	text := string(l.cur[:cut])
	if !l.split {
		l.split = true
		text += " " + SplitMarker
	}
	l.c.Line(l.src, text)
	l.any = true
	l.cur = append(l.cur[:0], l.cur[cut:]...)
}

// RuneBoundary returns len(b), or less when b ends in the first bytes of a UTF-8
// sequence.
func RuneBoundary(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// carriageReturn completes an update of a redrawn line, and shows it if the console has
// not shown one for ProgressEvery.
func (l *consoleLine) carriageReturn() {
	if len(l.cur) == 0 {
		return
	}
	l.prev, l.cur = l.cur, l.prev[:0]
	l.prevSeen = false
	if now := l.c.now(); l.shownAt.IsZero() || now.Sub(l.shownAt) >= ProgressEvery {
		l.shownAt = now
		l.show(l.prev)
		l.prevSeen = true
	}
}

// end ends the line: it shows the line's last update unless it was shown already (an
// empty line is a line too), and starts the next line.
func (l *consoleLine) end() {
	switch {
	case len(l.cur) > 0:
		l.show(l.cur)
	case len(l.prev) > 0 && !l.prevSeen:
		l.show(l.prev)
	case !l.any:
		l.show(nil)
	}
	l.cur, l.prev = l.cur[:0], l.prev[:0]
	l.open, l.prevSeen, l.any, l.split = false, false, false, false
}

func (l *consoleLine) show(text []byte) {
	l.c.Line(l.src, string(text))
	l.any = true
}

// LastLines returns the last n lines of text (all of it when n <= 0); a newline that
// ends text ends its last line.
func LastLines(text string, n int) string {
	if n <= 0 {
		return text
	}
	end := len(text)
	if strings.HasSuffix(text, "\n") {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if text[i] == '\n' {
			n--
			if n == 0 {
				return text[i+1:]
			}
		}
	}
	return text
}
