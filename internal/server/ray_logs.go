package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trainyard/trainyard/internal/rundir"
)

// The output Ray's endpoints serve is the driver's raw output, as Ray's do: a Ray job is
// one worker running one process, the entrypoint, so its driver is rank 0, and its output
// is rank 0's log of each attempt, in order, the bytes as written, without the console
// log's "trainyard:" lines and rank prefixes (which the native API and the CLI keep).

// driverLogs returns the paths, relative to the run folder, of rank 0's logs, one per
// attempt that has a logs folder, in attempt order.
func driverLogs(root *os.Root) ([]string, error) {
	entries, err := fs.ReadDir(root.FS(), rundir.LogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the run's logs: %w", err)
	}
	var attempts []int
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "attempt-"))
		if e.IsDir() && err == nil && strings.HasPrefix(e.Name(), "attempt-") {
			attempts = append(attempts, n)
		}
	}
	slices.Sort(attempts)
	paths := make([]string, len(attempts))
	for i, n := range attempts {
		paths[i] = rundir.LogPath(n, 0)
	}
	return paths, nil
}

// openRun opens a job's run folder as a root, so that no log read leaves it through a
// symbolic link; a run folder not yet made is (nil, nil).
func openRun(runDir string) (*os.Root, error) {
	if runDir == "" {
		return nil, nil
	}
	root, err := os.OpenRoot(runDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the run folder: %w", err)
	}
	return root, nil
}

// openDriverLog opens the driver's output (see above) as one log; a run folder not made
// yet is an empty log.
func openDriverLog(runDir string) (*fileLog, error) {
	root, err := openRun(runDir)
	if root == nil || err != nil {
		return &fileLog{}, err
	}
	defer root.Close()
	paths, err := driverLogs(root)
	if err != nil {
		return nil, err
	}
	log := &fileLog{}
	for _, p := range paths {
		f, err := root.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = log.add(f)
		}
		if err != nil {
			log.Close()
			return nil, fmt.Errorf("read log %s: %w", filepath.Base(p), err)
		}
	}
	return log, nil
}

// writeLogJSON answers the window as Ray's {"logs": "..."}, the text escaped as
// encoding/json escapes a string, streamed: a chunk of the log at a time.
func (s *Server) writeLogJSON(w http.ResponseWriter, win logWindow) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if err := writeJSONLogs(w, win.reader(), logChunk); err != nil {
		s.log.Debug("send a log", "err", err)
	}
}

// writeJSONLogs writes {"logs":"<text of r>"} and a newline to w, as writeJSON would
// write rayLogsResponse, reading r chunk bytes at a time. A chunk ends before a UTF-8
// sequence it would split, so each character is escaped as it would be whole.
func writeJSONLogs(w io.Writer, r io.Reader, chunk int) error {
	if _, err := io.WriteString(w, `{"logs":"`); err != nil {
		return err
	}
	buf := make([]byte, chunk+utf8.UTFMax)
	carry := 0 // bytes of a split sequence kept from the last read
	for {
		n, err := r.Read(buf[carry : carry+chunk])
		n += carry
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return err
		}
		cut := n
		if !eof {
			cut = completeRunes(buf[:n])
		}
		if werr := writeJSONStringBody(w, buf[:cut]); werr != nil {
			return werr
		}
		carry = copy(buf, buf[cut:n])
		if eof {
			break
		}
	}
	_, err := io.WriteString(w, "\"}\n")
	return err
}

// completeRunes returns the length of p without a UTF-8 sequence that its end cuts short.
func completeRunes(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p)
}

// writeJSONStringBody writes p as encoding/json writes it inside a string, without quotes.
func writeJSONStringBody(w io.Writer, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	quoted, err := json.Marshal(string(p))
	if err != nil {
		return err
	}
	_, err = w.Write(quoted[1 : len(quoted)-1])
	return err
}
