// Package testrelay is a TCP relay for tests: it listens on a loopback port of its own
// and passes every connection's bytes on to a target, both ways, recording what clients
// send, as a program that another user runs on an address the client trusts would.
package testrelay

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// Relay passes connections on to its target; Addr is where it listens.
type Relay struct {
	Addr string
	mu   sync.Mutex
	buf  bytes.Buffer
}

// New starts a relay to target, closed when the test ends.
func New(t *testing.T, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &Relay{Addr: ln.Addr().String()}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, io.TeeReader(in, r)); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return r
}

// Write records bytes a client sent.
func (r *Relay) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// Sent returns what clients sent through the relay so far.
func (r *Relay) Sent() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}
