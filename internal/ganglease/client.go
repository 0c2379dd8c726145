package ganglease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

// RefusedError is the server's refusal of a request: asking again would not help.
type RefusedError struct {
	// Reason is the server's message.
	Reason string
}

func (e *RefusedError) Error() string { return "the server refused the gang: " + e.Reason }

// Lease is a grant of a gang's resources; the server holds them for it until Release.
type Lease struct {
	// GPUs are the GPUs granted, one list per worker (empty lists for a gang on CPUs).
	GPUs   [][]int
	body   io.Closer
	cancel context.CancelFunc // ends the request, which outlives Acquire's ctx
}

// Release gives the gang's resources back to the server. It is safe to call more than once.
func (l *Lease) Release() {
	if l != nil && l.body != nil {
		_ = l.body.Close()
		l.cancel()
		l.body = nil
	}
}

// FromEnv returns the request a process of a server's job makes for a gang of the given
// sizes, and the socket to send it on, from the environment; ok is false outside a
// server's job.
func FromEnv(sizes Request) (socket string, req Request, ok bool) {
	socket = os.Getenv(EnvSocket)
	if socket == "" {
		return "", Request{}, false
	}
	sizes.Job, sizes.Secret = os.Getenv(EnvJob), os.Getenv(EnvSecret)
	return socket, sizes, true
}

// Acquire asks the server listening on socket for the request's resources and waits until it
// grants them, calling waiting (if not nil) with each new reason the lease waits, or
// until ctx ends. Once granted, they stay leased until Release, even after ctx ends
// (a run that is stopping its gang still uses them).
func Acquire(ctx context.Context, socket string, req Request, waiting func(string)) (*Lease, error) {
	if err := req.Check(); err != nil {
		return nil, &RefusedError{Reason: err.Error()}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	// The request's context ends with ctx only until the GPUs are granted.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	detach := context.AfterFunc(ctx, cancel)
	lease, err := acquire(ctx, hctx, socket, body, waiting)
	if err == nil && !detach() { // ctx ended as the GPUs came: give them back
		lease.body.Close()
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	lease.cancel = cancel
	return lease, nil
}

// acquire is Acquire's exchange with the server, over a request whose context is hctx.
func acquire(ctx, hctx context.Context, socket string, body []byte, waiting func(string)) (*Lease, error) {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
	hreq, err := http.NewRequestWithContext(hctx, http.MethodPost, "http://trainyard"+Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("ask the server for the gang's resources (%s): %w", socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &RefusedError{Reason: strings.TrimSpace(string(msg))}
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			resp.Body.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("wait for the gang's resources from the server: %w", err)
		}
		switch {
		case ev.Error != "":
			resp.Body.Close()
			return nil, &RefusedError{Reason: ev.Error}
		case ev.GPUs != nil:
			return &Lease{GPUs: ev.GPUs, body: resp.Body}, nil
		case ev.Waiting != "" && waiting != nil:
			waiting(ev.Waiting)
		}
	}
}
