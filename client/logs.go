package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/websocket"

	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/pause"
)

// truncatedPrefix starts a log the server cut to its last 16 MiB.
const truncatedPrefix = "[LOG TRUNCATED"

// LogOptions choose a job's log and how much of it to read.
type LogOptions struct {
	// Rank selects that rank's log of the job's last attempt; nil selects the console
	// log, what the job's supervisor printed: every rank's lines, prefixed with the rank.
	Rank *int
	// Tail keeps the last Tail lines; 0 keeps them all.
	Tail int
}

// Logs returns a job's log as it is now. The server sends a log's last 16 MiB at most,
// after a line that says it cut it.
func (c *Client) Logs(ctx context.Context, id string, opts LogOptions) (string, error) {
	path, err := jobPath(id, "/logs")
	if err != nil {
		return "", err
	}
	q := url.Values{}
	if opts.Rank != nil {
		q.Set("rank", strconv.Itoa(*opts.Rank))
	}
	if opts.Tail > 0 {
		q.Set("tail", strconv.Itoa(opts.Tail))
	}
	var text string
	err = c.do(ctx, request{method: http.MethodGet, path: path, query: q, want: http.StatusOK}, &text)
	return text, err
}

// WriteLog copies the whole of a job's log, as it is now, to w: the console log, or a
// rank's (opts.Rank) of the last attempt; opts.Tail is not taken.
func (c *Client) WriteLog(ctx context.Context, id string, opts LogOptions, w io.Writer) error {
	path, err := jobPath(id, "/logs")
	if err != nil {
		return err
	}
	q := url.Values{"whole": {"1"}}
	if opts.Rank != nil {
		q.Set("rank", strconv.Itoa(*opts.Rank))
	}
	return c.do(ctx, request{method: http.MethodGet, path: path, query: q, want: http.StatusOK}, w)
}

// Follow writes a job's log to w as it grows (opts.Tail lines of what it holds already,
// or all of it) and returns once the job has ended and its log is written, or when ctx
// ends (with ctx's error). It returns at once for a job that has already ended, after
// writing its log.
//
// The console log comes through the server's WebSocket /api/v1/jobs/{id}/logs/tail, the
// native twin of the one `ray job logs --follow` reads: the server pushes lines as they are written
// and closes the stream when the job has ended. A rank's log has no such stream: it is
// read again every poll interval (a second by default), and the new part written; a
// rank log over 16 MiB cannot be followed that way.
//
// When the stream breaks while the job runs (the server restarted, say), Follow
// connects again and goes on after the last line it wrote, for up to the reconnect time
// (30 seconds by default) without an answer.
func (c *Client) Follow(ctx context.Context, ref string, w io.Writer, opts LogOptions) error {
	d, err := c.Get(ctx, ref) // the job's ID, for a name; an unknown job is an APIError, not a failed handshake
	if err != nil {
		return err
	}
	if opts.Rank != nil {
		return c.followRank(ctx, d.Job.ID, w, opts)
	}
	return c.followConsole(ctx, d.Job.ID, w, opts.Tail)
}

// followConsole follows the console log through the WebSocket, connecting again when the
// stream breaks before the job has ended.
func (c *Client) followConsole(ctx context.Context, id string, w io.Writer, tail int) error {
	out := &resumeWriter{w: w}
	if err := c.skipBacklog(ctx, id, out, tail); err != nil {
		return err
	}
	var lost time.Time // since when the server has not answered; zero while it answers
	for {
		out.restart()
		dialed, err := c.streamLog(ctx, id, out)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d, gerr := c.Get(ctx, id)
		var refused *APIError
		switch {
		case gerr == nil && Ended(d.Job.Status):
			return nil // the server closes the stream once the job has ended and its log is sent
		case gerr == nil && !dialed:
			return err // the server answers but refuses the stream
		case gerr == nil:
			lost = time.Time{}
		case errors.As(gerr, &refused):
			return gerr // deleted meanwhile, say
		case lost.IsZero():
			lost = time.Now()
		case time.Since(lost) > c.retry:
			return fmt.Errorf("follow the log of job %s: the server has not answered for %s: %w", id, c.retry, gerr)
		}
		if err := pause.For(ctx, c.poll); err != nil {
			return err
		}
	}
}

// skipBacklog makes out skip what the log holds now, but its last tail lines, which it
// writes.
func (c *Client) skipBacklog(ctx context.Context, id string, out *resumeWriter, tail int) error {
	if tail <= 0 {
		return nil
	}
	text, err := c.Logs(ctx, id, LogOptions{})
	if err != nil {
		return err
	}
	whole := text[:strings.LastIndexByte(text, '\n')+1] // the stream sends a partial line later, whole
	if strings.HasPrefix(whole, truncatedPrefix) {
		// The server sent the last 16 MiB only, so the lines before them are not counted:
		// the stream's first lines are skipped by count all the same, which may write
		// older lines again.
		_, whole, _ = strings.Cut(whole, "\n")
	}
	if _, err := io.WriteString(out.w, logstream.LastLines(whole, tail)); err != nil {
		return err
	}
	out.done = position{lines: strings.Count(whole, "\n")}
	return nil
}

// streamLog copies the job's console log from the WebSocket to out until the server
// closes it (nil) or it breaks. dialed says whether the stream was open.
func (c *Client) streamLog(ctx context.Context, id string, out io.Writer) (dialed bool, err error) {
	cfg, err := c.wsConfig(ctx, id)
	if err != nil {
		return false, err
	}
	conn, err := c.dialWebSocket(ctx, cfg)
	if err != nil {
		c.dropSession(sessionOf(cfg.Header)) // it may have expired: the next try starts another
		return false, fmt.Errorf("follow the log of job %s: %w", id, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for {
		var msg string
		err := websocket.Message.Receive(conn, &msg)
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("follow the log of job %s: %w", id, err)
		}
		if _, err := io.WriteString(out, msg); err != nil {
			return true, err
		}
	}
}

// dialWebSocket opens the WebSocket cfg names, through the client's dialer if it has one.
func (c *Client) dialWebSocket(ctx context.Context, cfg *websocket.Config) (*websocket.Conn, error) {
	if c.dial == nil {
		return cfg.DialContext(ctx)
	}
	raw, err := c.dial(ctx, "tcp", cfg.Location.Host)
	if err != nil {
		return nil, err
	}
	conn, err := websocket.NewClient(cfg, raw)
	if err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// wsConfig returns the WebSocket configuration of the job's log tail: ws or wss, the
// proof of the request, and the server itself as Origin, which the server accepts.
func (c *Client) wsConfig(ctx context.Context, id string) (*websocket.Config, error) {
	if c.addrErr != nil {
		return nil, c.addrErr
	}
	loc := *c.base
	loc.Scheme = map[string]string{"http": "ws", "https": "wss"}[c.base.Scheme]
	loc.Path = "/api/v1/jobs/" + id + "/logs/tail"
	loc.RawPath = "/api/v1/jobs/" + url.PathEscape(id) + "/logs/tail"
	cfg, err := websocket.NewConfig(loc.String(), c.base.String())
	if err != nil {
		return nil, fmt.Errorf("follow the log of job %s: %w", id, err)
	}
	c.setHeaders(cfg.Header)
	if _, err := c.authorize(ctx, cfg.Header, http.MethodGet, loc.RequestURI(), nil); err != nil {
		return nil, fmt.Errorf("follow the log of job %s: %w", id, err)
	}
	cfg.TlsConfig = c.tls
	return cfg, nil
}

// followRank follows a rank's log by reading it again every poll interval.
func (c *Client) followRank(ctx context.Context, id string, w io.Writer, opts LogOptions) error {
	written, attempts, first := 0, 0, true
	for {
		d, err := c.Get(ctx, id) // before reading, so that the read after the end drains the log
		if err != nil {
			return err
		}
		ended := Ended(d.Job.Status)
		if d.Run != nil && len(d.Run.Attempts) != attempts { // a new attempt writes a new log
			written, attempts = 0, len(d.Run.Attempts)
		}
		text, err := c.Logs(ctx, id, LogOptions{Rank: opts.Rank})
		switch {
		case IsNotFound(err) && !ended: // no attempt yet
		case err != nil:
			return err
		case strings.HasPrefix(text, truncatedPrefix):
			return fmt.Errorf("the log of rank %d of job %s is over 16 MiB, too long to follow; follow the console log (no --rank)", *opts.Rank, id)
		default:
			if first && opts.Tail > 0 {
				whole := text[:strings.LastIndexByte(text, '\n')+1]
				written = len(whole) - len(logstream.LastLines(whole, opts.Tail))
			}
			if _, err := io.WriteString(w, text[min(written, len(text)):]); err != nil {
				return err
			}
			written, first = len(text), false
		}
		if ended {
			return nil
		}
		if err := pause.For(ctx, c.poll); err != nil {
			return err
		}
	}
}

// position is a place in a log: a line number (from 0) and a byte offset in that line.
type position struct {
	lines, bytes int
}

// before reports whether p comes before q.
func (p position) before(q position) bool {
	return p.lines < q.lines || p.lines == q.lines && p.bytes < q.bytes
}

// resumeWriter writes a log stream to w, but for what it already wrote: after restart, a
// stream that starts from the log's beginning again goes on where the last one stopped.
// Places are counted in lines, so a stream that rewrote invalid UTF-8 keeps its place.
type resumeWriter struct {
	w    io.Writer
	pos  position // where the current stream is
	done position // how far w has the log
}

// restart tells the writer that a new stream starts from the log's beginning.
func (r *resumeWriter) restart() { r.pos = position{} }

// Write writes to w the part of p past what w has.
func (r *resumeWriter) Write(p []byte) (int, error) {
	consumed := 0
	for consumed < len(p) {
		seg := p[consumed:]
		if i := bytes.IndexByte(seg, '\n'); i >= 0 {
			seg = seg[:i+1]
		}
		if err := r.writeSegment(seg); err != nil {
			return consumed, err
		}
		consumed += len(seg)
	}
	return consumed, nil
}

// writeSegment writes the part of seg, a piece of one line that ends with its newline or
// not, that w does not have.
func (r *resumeWriter) writeSegment(seg []byte) error {
	out := seg
	switch {
	case r.pos.lines < r.done.lines:
		out = nil
	case r.pos.lines == r.done.lines:
		out = seg[min(len(seg), max(0, r.done.bytes-r.pos.bytes)):]
	}
	if seg[len(seg)-1] == '\n' {
		r.pos = position{lines: r.pos.lines + 1}
	} else {
		r.pos.bytes += len(seg)
	}
	if r.done.before(r.pos) {
		r.done = r.pos
	}
	if len(out) == 0 {
		return nil
	}
	_, err := r.w.Write(out)
	return err
}
