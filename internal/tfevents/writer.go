package tfevents

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/trainyard/trainyard/internal/filemode"
)

// FileVersion is the file_version of the first event of every file, which tells
// TensorBoard the file's format.
const FileVersion = "brain.Event:2"

// FilePrefix starts the name of every events file; TensorBoard looks only at files whose
// names hold "tfevents".
const FilePrefix = "events.out.tfevents."

// fileSeq numbers the files this process creates, to keep their names unique.
var fileSeq atomic.Uint64

// Writer appends scalar summaries to one events file. Safe for concurrent use.
type Writer struct {
	path string

	mu     sync.Mutex
	f      *os.File
	buf    *bufio.Writer // sticky: after a failed write, every later write fails too
	closed bool
}

// Create makes dir if needed and creates a new events file in it, named
// "events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>", where n counts the files this
// process creates. It writes the first event, with file_version "brain.Event:2", through
// to the operating system.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create events file: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("create events file: %w", err)
	}
	defer root.Close()
	return CreateIn(root)
}

// CreateIn is Create in the folder root (whose Name is its path), which must exist: the
// file is created through root, so it lands in that folder even if another one is put
// in its place. The Writer does not keep root.
func CreateIn(root *os.Root) (*Writer, error) {
	now := time.Now()
	dir := filepath.Clean(root.Name())
	f, name, err := createUnique(root, now)
	if err != nil {
		return nil, fmt.Errorf("create events file in %s: %w", dir, err)
	}
	w := &Writer{path: filepath.Join(dir, name), f: f, buf: bufio.NewWriter(f)}
	first := appendEvent(nil, event{wallTime: wallSeconds(now), fileVersion: FileVersion})
	if err := w.write(first); err != nil {
		return nil, errors.Join(err, f.Close(), root.Remove(name))
	}
	if err := w.Flush(); err != nil {
		return nil, errors.Join(err, f.Close(), root.Remove(name))
	}
	return w, nil
}

// createUnique creates a file with a new name in root and returns it with its name. It
// retries with the next sequence number when the name is taken, as it can be by an
// earlier container whose process had the same pid.
func createUnique(root *os.Root, now time.Time) (*os.File, string, error) {
	host := hostname()
	_, mode := filemode.In(root)
	for range 100 {
		name := fmt.Sprintf("%s%d.%s.%d.%d", FilePrefix, now.Unix(), host, os.Getpid(), fileSeq.Add(1))
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if !errors.Is(err, fs.ErrExist) {
			return f, name, err
		}
	}
	return nil, "", errors.New("every file name tried is taken")
}

// hostname returns this machine's name, fit for a file name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r < ' ' {
			return '_'
		}
		return r
	}, h)
}

// Path returns the events file's path.
func (w *Writer) Path() string { return w.path }

// AddScalars writes one Event at step, with wall time t (the current time if t is zero),
// holding one summary value per metric (tag = metric name), sorted by tag. Values are
// stored as float32; NaN and ±Inf are kept. step must not be negative and tags must be
// non-empty UTF-8. An empty metrics map writes nothing.
//
// The event is buffered: Flush or Sync hands it to the operating system.
func (w *Writer) AddScalars(step int64, t time.Time, metrics map[string]float64) error {
	if step < 0 {
		return fmt.Errorf("add scalars to %s: step %d is negative", w.path, step)
	}
	values, err := summaryValues(metrics)
	if err != nil {
		return fmt.Errorf("add scalars to %s at step %d: %w", w.path, step, err)
	}
	if t.IsZero() {
		t = time.Now()
	}
	var data []byte
	if len(values) > 0 {
		data = appendEvent(nil, event{wallTime: wallSeconds(t), step: step, summary: values})
	}
	if err := w.write(data); err != nil {
		return fmt.Errorf("add scalars at step %d: %w", step, err)
	}
	return nil
}

// summaryValues returns one value per metric, sorted by tag.
func summaryValues(metrics map[string]float64) ([]value, error) {
	values := make([]value, 0, len(metrics))
	for tag, v := range metrics {
		if tag == "" || !utf8.ValidString(tag) {
			return nil, fmt.Errorf("metric name %q is not a valid tag (non-empty UTF-8)", tag)
		}
		// Conversion rounds to nearest (IEEE 754): too large a value becomes ±Inf.
		values = append(values, value{tag: tag, simpleValue: float32(v)})
	}
	slices.SortFunc(values, func(a, b value) int { return strings.Compare(a.tag, b.tag) })
	return values, nil
}

// write buffers data, a serialized Event, as one record. With no data it only checks that
// the writer is open.
func (w *Writer) write(data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedError()
	}
	if data == nil {
		return nil
	}
	if _, err := w.buf.Write(appendRecord(nil, data)); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	return nil
}

// Flush writes the buffered events to the operating system, where TensorBoard can read
// them.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedError()
	}
	return w.flush()
}

// Sync flushes the buffered events and commits the file to stable storage (fsync).
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedError()
	}
	return w.sync()
}

// Close flushes and syncs the buffered events and closes the file. Closing a closed Writer
// does nothing; its other methods then return an error wrapping os.ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.sync()
	if cerr := w.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close %s: %w", w.path, cerr)
	}
	return err
}

// flush writes the buffer to the file. The caller holds w.mu.
func (w *Writer) flush() error {
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("flush %s: %w", w.path, err)
	}
	return nil
}

// sync flushes the buffer and fsyncs the file. The caller holds w.mu.
func (w *Writer) sync() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", w.path, err)
	}
	return nil
}

// closedError is the error of a method called after Close.
func (w *Writer) closedError() error {
	return fmt.Errorf("events file %s: %w", w.path, os.ErrClosed)
}
