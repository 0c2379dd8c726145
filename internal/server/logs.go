package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// maxLogBytes is the most of a log file one response holds: its last 16 MiB, as Ray's
// job log client reads (RAY_JOB_LOG_MAX_READ_BYTES).
const maxLogBytes = 16 << 20

// readLogTail returns the log file at path; a log over limit bytes is cut to its last
// limit bytes from a line start, after a line that says so, as Ray does. A missing file
// is an empty log.
func readLogTail(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read log: %w", err)
	}
	size := info.Size()
	if size <= limit {
		data, err := io.ReadAll(f)
		if err != nil {
			return "", fmt.Errorf("read log: %w", err)
		}
		return string(data), nil
	}
	data := make([]byte, limit)
	n, err := f.ReadAt(data, size-limit)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read log: %w", err)
	}
	tail := string(data[:n])
	if i := strings.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:] // skip the partial first line
	}
	return fmt.Sprintf("[LOG TRUNCATED — showing last %s of %s total]\n%s", humanBytes(limit), humanBytes(size), tail), nil
}

// humanBytes writes a size in MiB, or GiB from 1 GiB on.
func humanBytes(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
