package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/net/websocket"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/store"
)

// Tailing a log: how often the file is read again, the most one message holds, and how
// long a write to the client may take before the server gives up on a client that
// stopped reading.
const (
	tailPoll         = 200 * time.Millisecond
	tailMaxChunk     = 64 << 10
	tailWriteTimeout = 10 * time.Second
)

// rayTail answers GET /api/jobs/{id}/logs/tail: a WebSocket that sends the driver's raw
// output (ray_logs.go) as text messages, whole lines, as it grows, and closes once the job
// has ended and the output is sent, as Ray's job manager does.
func (s *Server) rayTail(w http.ResponseWriter, r *http.Request) {
	j, err := s.rayJob(r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	s.tail(w, r, ray, j, driverLogs, "/api/jobs/"+j.ID+"/logs")
}

// nativeTail answers GET /api/v1/jobs/{id}/logs/tail (an ID or a name): the same stream
// as Ray's, of the job's console log, with its rank prefixes and trainyard lines, which
// the CLI's logs -f shows.
func (s *Server) nativeTail(w http.ResponseWriter, r *http.Request) {
	j, err := s.nativeJob(r)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	s.tail(w, r, native, j, consoleLogs, "/api/v1/jobs/"+j.ID+"/logs")
}

// consoleLogs returns the console log's path, relative to the run folder.
func consoleLogs(*os.Root) ([]string, error) { return []string{jobs.ConsoleLog}, nil }

// tail serves a log tail WebSocket of job j, streaming the files that logs names, in turn.
func (s *Server) tail(w http.ResponseWriter, r *http.Request, a api, j *store.Job, logs logFiles, plain string) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.writeError(w, r, a, invalid("this endpoint is a WebSocket: connect with a WebSocket client, or read GET %s", plain))
		return
	}
	handshake := func(cfg *websocket.Config, r *http.Request) error {
		err := checkOrigin(cfg, r)
		if err != nil {
			s.refused(r, http.StatusForbidden, err.Error())
		}
		return err
	}
	ws := websocket.Server{Handshake: handshake, Handler: func(conn *websocket.Conn) {
		s.tails.Add(1)
		defer s.tails.Add(-1)
		defer s.closeTail(conn)
		if err := s.followLog(conn, j.ID, j.RunDir, logs); err != nil {
			s.log.Debug("log tail ended", "job", j.ID, "err", err)
		}
	}}
	ws.ServeHTTP(w, r)
}

// logFiles returns the paths, relative to a run folder, of the logs a tail streams in turn.
type logFiles func(root *os.Root) ([]string, error)

// closeTail closes a log tail; its close frame, too, gives up on a client that does not
// read.
func (s *Server) closeTail(conn *websocket.Conn) {
	_ = conn.SetWriteDeadline(time.Now().Add(s.tailWriteTimeout))
	_ = conn.Close()
}

// checkOrigin accepts a WebSocket without Origin (Ray's clients send none) or from a
// page of this server; a browser page elsewhere cannot read the logs, even with a token.
func checkOrigin(cfg *websocket.Config, r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil {
		return fmt.Errorf("bad Origin %q: %w", origin, err)
	}
	if u.Host != r.Host {
		return fmt.Errorf("origin %s is not this server", origin)
	}
	cfg.Origin = u
	return nil
}

// followLog sends the logs of the run folder runDir to conn until the job has ended and
// they are drained, the job is deleted, or the client goes away.
func (s *Server) followLog(conn *websocket.Conn, id, runDir string, logs logFiles) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the client's messages are ignored; a read error means it left
		var discard []byte
		for websocket.Message.Receive(conn, &discard) == nil {
		}
		cancel()
	}()
	t := &logTail{runDir: runDir, logs: logs, timeout: s.tailWriteTimeout}
	tick := time.NewTicker(tailPoll)
	defer tick.Stop()
	for {
		ended := s.jobEnded(id) // before reading, so that the read drains what the job wrote
		n, err := t.send(conn, ended)
		if err != nil {
			return err
		}
		if ended && n == 0 {
			return nil
		}
		if n == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
}

// jobEnded reports whether the job has ended or is gone.
func (s *Server) jobEnded(id string) bool {
	j, err := s.cfg.Jobs.Get(id)
	return err != nil || j.Status.Terminal()
}

// logTail reads growing logs from where it stopped, each in turn (for Ray's endpoint,
// rank 0's log of each attempt).
type logTail struct {
	runDir  string
	logs    logFiles
	timeout time.Duration // for each write to the client
	file    int           // the index of the attempt's log being read
	off     int64         // in that log
	buf     []byte        // tailMaxChunk bytes to read into
	pending []byte        // read but not yet sent: the start of a line
}

// send reads what the file gained and sends its whole lines as one message; final sends
// a last partial line too. It returns how many bytes it read.
func (t *logTail) send(conn *websocket.Conn, final bool) (int, error) {
	if t.buf == nil {
		t.buf = make([]byte, tailMaxChunk)
	}
	n, err := t.read(t.buf)
	if err != nil {
		return 0, err
	}
	t.pending = append(t.pending, t.buf[:n]...)
	msg := cutMessage(&t.pending, final)
	if msg != "" {
		if err := conn.SetWriteDeadline(time.Now().Add(t.timeout)); err != nil {
			return 0, fmt.Errorf("send log: %w", err)
		}
		if err := websocket.Message.Send(conn, msg); err != nil {
			return 0, fmt.Errorf("send log: %w", err)
		}
	}
	return n, nil
}

// read reads from where it stopped; it goes on to the next attempt's log once the one it
// reads has no more and a later one exists. A log not yet created reads nothing.
func (t *logTail) read(buf []byte) (int, error) {
	root, err := openRun(t.runDir)
	if root == nil || err != nil {
		return 0, err
	}
	defer root.Close()
	paths, err := t.logs(root)
	if err != nil {
		return 0, err
	}
	for t.file < len(paths) {
		n, err := readAt(root, paths[t.file], buf, t.off)
		if err != nil {
			return 0, err
		}
		if n > 0 || t.file == len(paths)-1 {
			t.off += int64(n)
			return n, nil
		}
		t.file, t.off = t.file+1, 0
	}
	return 0, nil
}

// readAt reads the file p of root at offset off; a missing file reads nothing.
func readAt(root *os.Root, p string, buf []byte, off int64) (int, error) {
	f, err := root.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read log: %w", err)
	}
	return n, nil
}

// cutMessage removes from *pending what to send now and returns it as valid UTF-8: all
// of it when final; else up to its last newline, or, when it is full without one, up to
// its last whole character.
func cutMessage(pending *[]byte, final bool) string {
	p := *pending
	end := len(p)
	if !final {
		end = strings.LastIndexByte(string(p), '\n') + 1
		if end == 0 && len(p) >= tailMaxChunk {
			end = logstream.RuneBoundary(p)
		}
	}
	msg := strings.ToValidUTF8(string(p[:end]), "\uFFFD")
	*pending = append(p[:0:0], p[end:]...)
	return msg
}
