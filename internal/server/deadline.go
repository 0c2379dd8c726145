package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// BodyRate is how slowly a client may send a request body before the server stops
// reading it: after Grace, the body must have come at MinBytesPerSecond on average
// since the request began. A client that trickles a body (a byte now and then) is cut
// off, while a large upload on a slow link goes on as long as it keeps that pace.
// Requests without a body (the log-follow WebSocket, log downloads) are not affected.
// A field that is zero or negative takes its value from DefaultBodyRate.
type BodyRate struct {
	Grace             time.Duration
	MinBytesPerSecond int64
}

// DefaultBodyRate returns the pace the server asks of request bodies unless told
// otherwise: 30 seconds of grace, then 16 KiB/s (a 100 MiB package may take 1.8 hours).
func DefaultBodyRate() BodyRate {
	return BodyRate{Grace: 30 * time.Second, MinBytesPerSecond: 16 << 10}
}

// withDefaults returns b with its unset fields taken from DefaultBodyRate.
func (b BodyRate) withDefaults() BodyRate {
	d := DefaultBodyRate()
	if b.Grace <= 0 {
		b.Grace = d.Grace
	}
	if b.MinBytesPerSecond <= 0 {
		b.MinBytesPerSecond = d.MinBytesPerSecond
	}
	return b
}

// errSlowBody: the client sent the request body too slowly (HTTP 408).
var errSlowBody = errors.New("request body too slow")

// LimitBodyRate returns next behind a read deadline for each request body, which moves
// on with every byte that comes: the body must keep rate's pace. It goes before the
// token check, which reads a signed body itself, so that no request body, authenticated
// or not, holds a connection open for ever.
func LimitBodyRate(rate BodyRate, next http.Handler) http.Handler {
	rate = rate.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &pacedBody{body: r.Body, rc: http.NewResponseController(w), rate: rate, start: time.Now()}
		if err := b.rc.SetReadDeadline(b.deadline()); err != nil {
			next.ServeHTTP(w, r) // a connection without deadlines (none of the server's own)
			return
		}
		r.Body = b
		next.ServeHTTP(w, r)
		// net/http looks at the body's own type, once the handler is done, to decide
		// whether to read what is left of it (an Expect: 100-continue body that was never
		// asked for is not).
		r.Body = b.body
	})
}

// pacedBody is a request body whose connection has a read deadline that moves on with
// each byte read; once the body has been read to its end the deadline is lifted, so that
// a handler that works long after reading keeps its connection.
type pacedBody struct {
	body  io.ReadCloser
	rc    *http.ResponseController
	rate  BodyRate
	start time.Time
	read  int64
	done  bool
}

// deadline is when the bytes read so far stop covering the time taken.
func (b *pacedBody) deadline() time.Time {
	return b.start.Add(b.rate.Grace + time.Duration(b.read)*time.Second/time.Duration(b.rate.MinBytesPerSecond))
}

// Read reads the body under its deadline; a read that passes it fails with errSlowBody.
func (b *pacedBody) Read(p []byte) (int, error) {
	if !b.done {
		_ = b.rc.SetReadDeadline(b.deadline())
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	switch {
	case err == nil || b.done:
	case errors.Is(err, io.EOF):
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays: what net/http reads of the rest after the handler (to
		// reuse the connection) fails at once, and the connection is closed.
		b.done = true
		err = &refusal{kind: errSlowBody, cause: err, msg: fmt.Sprintf(
			"the request body came too slowly: %d bytes in %s; after %s this server reads bodies at %d bytes/s at least",
			b.read, time.Since(b.start).Round(time.Millisecond), b.rate.Grace, b.rate.MinBytesPerSecond)}
	}
	return n, err
}

// Close closes the body.
func (b *pacedBody) Close() error { return b.body.Close() }
