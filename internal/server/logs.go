package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
)

// maxLogBytes is the most of a log file one response holds: its last 16 MiB, as Ray's
// job log client reads (RAY_JOB_LOG_MAX_READ_BYTES).
const maxLogBytes = 16 << 20

// logChunk is how much of a log a response reads at a time: what it holds of a log,
// however long, while it sends it.
const logChunk = 32 << 10

// logWindow is the part of a log that a response sends: the bytes [from, size) of src,
// after header, a line saying that the log was cut ("" when it was not). It is sent
// from the file as it is read, never held whole.
type logWindow struct {
	src        io.ReaderAt
	header     string
	from, size int64
}

// cutLog returns the window of the log src of size bytes that a response sends: all of
// it, or, over limit bytes, its last limit bytes from a line start, after a line that
// says so, as Ray does.
func cutLog(src io.ReaderAt, size, limit int64) (logWindow, error) {
	if size <= limit {
		return logWindow{src: src, size: size}, nil
	}
	start := size - limit
	nl, err := indexByteAt(src, start, size, '\n')
	if err != nil {
		return logWindow{}, err
	}
	if nl >= 0 {
		start = nl + 1 // skip the partial first line
	}
	header := fmt.Sprintf("[LOG TRUNCATED — showing last %s of %s total]\n", humanBytes(limit), humanBytes(size))
	return logWindow{src: src, header: header, from: start, size: size}, nil
}

// lastLines returns the window cut to its last n lines (n <= 0: all of it), counted as
// logstream.LastLines counts them in the text the window sends: a final newline ends
// the last line, and the header is a line of its own.
func (w logWindow) lastLines(n int) (logWindow, error) {
	if n <= 0 || (w.from == w.size && w.header != "") {
		return w, nil
	}
	end := w.size
	if end > w.from {
		last := make([]byte, 1)
		if _, err := w.src.ReadAt(last, end-1); err != nil {
			return w, fmt.Errorf("read log: %w", err)
		}
		if last[0] == '\n' {
			end--
		}
	}
	start, left, err := lineStarts(w.src, w.from, end, n)
	switch {
	case err != nil:
		return w, err
	case left == 0, left == 1 && w.header != "": // the header's newline is the n-th
		return logWindow{src: w.src, from: start, size: w.size}, nil
	}
	return w, nil
}

// lineStarts looks back from end for n newlines in src, no further than from. It returns
// the offset after the n-th (from, when there are fewer) and how many were missing.
func lineStarts(src io.ReaderAt, from, end int64, n int) (int64, int, error) {
	buf := make([]byte, logChunk)
	for end > from {
		size := min(int64(len(buf)), end-from)
		chunk := buf[:size]
		if _, err := src.ReadAt(chunk, end-size); err != nil && !errors.Is(err, io.EOF) {
			return 0, n, fmt.Errorf("read log: %w", err)
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			if n--; n == 0 {
				return end - size + int64(i) + 1, 0, nil
			}
		}
		end -= size
	}
	return from, n, nil
}

// indexByteAt returns the offset of the first c in src between from and to, or -1.
func indexByteAt(src io.ReaderAt, from, to int64, c byte) (int64, error) {
	buf := make([]byte, logChunk)
	for off := from; off < to; {
		n, err := src.ReadAt(buf[:min(int64(len(buf)), to-off)], off)
		if i := bytes.IndexByte(buf[:n], c); i >= 0 {
			return off + int64(i), nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("read log: %w", err)
		}
		if n == 0 {
			break
		}
		off += int64(n)
	}
	return -1, nil
}

// reader returns the text the window sends: the header, then its bytes of the log.
func (w logWindow) reader() io.Reader {
	return io.MultiReader(strings.NewReader(w.header), io.NewSectionReader(w.src, w.from, w.size-w.from))
}

// fileLog is a log made of files read one after another (a Ray driver's output is
// rank 0's log of each attempt), each as long as it was when opened: a log that grows
// while it is sent is sent as it was. Its zero value is an empty log.
type fileLog struct {
	parts []filePart
	size  int64
}

// filePart is one file of a fileLog.
type filePart struct {
	f    *os.File
	size int64
}

// add appends the open file f to the log; the log closes it.
func (l *fileLog) add(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("read log: %w", err)
	}
	l.parts = append(l.parts, filePart{f: f, size: info.Size()})
	l.size += info.Size()
	return nil
}

// ReadAt reads the log as one file: io.ReaderAt.
func (l *fileLog) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, part := range l.parts {
		if off >= part.size {
			off -= part.size
			continue
		}
		if len(p) == 0 {
			return n, nil
		}
		want := min(int64(len(p)), part.size-off)
		m, err := part.f.ReadAt(p[:want], off)
		n += m
		if err != nil && !errors.Is(err, io.EOF) {
			return n, err
		}
		if int64(m) < want {
			return n, io.ErrUnexpectedEOF // the file was cut since it was opened
		}
		p, off = p[m:], 0
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// Close closes the log's files.
func (l *fileLog) Close() error {
	var errs []error
	for _, part := range l.parts {
		errs = append(errs, part.f.Close())
	}
	return errors.Join(errs...)
}

// openLog opens the log file at path; a missing file is an empty log.
func openLog(path string) (*fileLog, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &fileLog{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	l := &fileLog{}
	return l, l.add(f)
}

// writeLogText answers the window as text/plain, streamed from the file. Logs are not
// to be kept by caches (no-store), as every answer of the API.
func (s *Server) writeLogText(w http.ResponseWriter, win logWindow) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if _, err := io.CopyBuffer(w, win.reader(), make([]byte, logChunk)); err != nil {
		s.log.Debug("send a log", "err", err)
	}
}

// humanBytes writes a size in MiB, or GiB from 1 GiB on.
func humanBytes(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
