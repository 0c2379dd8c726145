package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/testrelay"
)

// tape records every request a server got, as it came over the wire.
type tape struct {
	mu    sync.Mutex
	dumps [][]byte
}

func (tp *tape) record(r *http.Request) {
	dump, err := httputil.DumpRequest(r, true)
	if err != nil {
		panic(err)
	}
	tp.mu.Lock()
	tp.dumps = append(tp.dumps, dump)
	tp.mu.Unlock()
}

func (tp *tape) all() [][]byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([][]byte(nil), tp.dumps...)
}

// realServer is a trainyard server's checks with the tests' token in front of a handler
// that counts what reaches it.
type realServer struct {
	*httptest.Server
	passed atomic.Int64
}

func newCheckingServer(t *testing.T) *realServer {
	s := &realServer{}
	s.Server = httptest.NewServer(proving(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil { // as the server's handlers: act only on a whole body
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.passed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jobs": [], "id": "job-1", "status": "STOPPED"}`)
	})))
	t.Cleanup(s.Close)
	return s
}

// replay sends a recorded request, byte for byte, to addr and returns the status.
func replay(t *testing.T, addr string, dump []byte) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(dump); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A program that holds the port (the server stopped, another user listens there) learns
// nothing that grants access: the client sends it a nonce, sees it cannot prove the token,
// and stops; nothing it got opens the real server.
func TestImpostorLearnsNothing(t *testing.T) {
	answers := map[string]http.HandlerFunc{
		"answers 200 to everything": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"jobs": []}`)
		},
		"answers a made-up proof": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"session": "AAAA", "serverProof": "BBBB"}`)
		},
		"asks for a bearer token": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trainyard"`)
			w.WriteHeader(http.StatusUnauthorized)
		},
	}
	real := newCheckingServer(t)
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			var tp tape
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tp.record(r)
				answer(w, r)
			}))
			defer fake.Close()
			c := New(fake.URL, testToken)
			_, err := c.List(context.Background())
			if !errors.Is(err, ErrNotTheServer) {
				t.Fatalf("List through an impostor: %v, want ErrNotTheServer", err)
			}
			_, err = c.Submit(context.Background(), SubmitRequest{Job: trainJob("mnist", 1)})
			if !errors.Is(err, ErrNotTheServer) {
				t.Fatalf("Submit through an impostor: %v, want ErrNotTheServer", err)
			}
			dumps := tp.all()
			if len(dumps) == 0 {
				t.Fatal("the impostor saw nothing; the test proves nothing")
			}
			for _, d := range dumps {
				if bytes.Contains(d, []byte(testToken)) || bytes.Contains(bytes.ToLower(d), []byte("authorization:")) {
					t.Errorf("the impostor got a token or a proof:\n%s", d)
				}
				if !bytes.HasPrefix(d, []byte("POST "+auth.ChallengePath+" ")) {
					t.Errorf("the impostor got more than a challenge:\n%s", d)
				}
				replay(t, real.Listener.Addr().String(), d)
			}
			if n := real.passed.Load(); n != 0 {
				t.Errorf("%d replayed requests reached the real server", n)
			}
		})
	}
}

// A relay at an address of its own (a port listed for the token that another user holds
// while the server listens on another) passes the bytes on to the real server, yet gets
// no session: the server's proof is for the address its connection arrived at, the client
// checks it against the relay's, and stops after the challenge. Nothing reaches the
// server's handlers, and the relay sees no proof.
func TestRelayAtItsOwnAddressGetsNoSession(t *testing.T) {
	real := newCheckingServer(t)
	relay := testrelay.New(t, real.Listener.Addr().String())
	c := New("http://"+relay.Addr, testToken)
	ctx := context.Background()
	_, err := c.List(ctx)
	if !errors.Is(err, ErrNotTheServer) || !strings.Contains(err.Error(), "proof is for "+real.Listener.Addr().String()) {
		t.Fatalf("List through a relay: %v, want ErrNotTheServer naming the server's own address", err)
	}
	if _, _, err := c.SignInLink(ctx); !errors.Is(err, ErrNotTheServer) {
		t.Errorf("SignInLink through a relay: %v, want ErrNotTheServer", err)
	}
	if n := real.passed.Load(); n != 0 {
		t.Errorf("%d requests through the relay reached the server's handlers", n)
	}
	sent := relay.Sent()
	if !bytes.Contains(sent, []byte("POST "+auth.ChallengePath+" ")) {
		t.Fatal("the relay passed no challenge on; the test proves nothing")
	}
	if bytes.Contains(bytes.ToLower(sent), []byte("authorization:")) || bytes.Contains(sent, []byte(testToken)) {
		t.Errorf("the relay saw a proof or the token:\n%s", sent)
	}
	if _, err := New(real.URL, testToken).List(ctx); err != nil {
		t.Errorf("List at the server's own address: %v", err)
	}
}

// onPath makes the client reach relay while its connections say they reached real: a
// relay on the path to the server's own address (a router, say), which the address in
// the server's proof cannot tell apart; the proofs of the requests must stop it.
func onPath(relay, real *httptest.Server) Option {
	to, claimed := relay.Listener.Addr().String(), real.Listener.Addr()
	return WithDialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, to)
		if err != nil {
			return nil, err
		}
		return addrConn{Conn: conn, remote: claimed}, nil
	})
}

// addrConn is a connection that names another remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// A relay on the path between the client and the real server sees every request, yet
// none of them works a second time.
func TestRelayLearnsNothingReplayable(t *testing.T) {
	real := newCheckingServer(t)
	var tp tape
	relay := newRelay(t, real, func(r *http.Request) { tp.record(r) })
	c := New(real.URL, testToken, onPath(relay, real.Server))
	ctx := context.Background()
	if _, err := c.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stop(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.UploadPackage(ctx, "gcs://x.zip", bytes.Repeat([]byte("z"), 3<<20)); err != nil {
		t.Fatal(err)
	}
	through := real.passed.Load()
	if through != 3 {
		t.Fatalf("%d requests went through the relay, want 3", through)
	}
	for _, d := range tp.all() {
		if bytes.Contains(d, []byte(testToken)) {
			t.Errorf("the relay saw the token:\n%.300s", d)
		}
		if bytes.HasPrefix(d, []byte("POST "+auth.ChallengePath+" ")) {
			continue // a challenge grants nothing
		}
		if code := replay(t, real.Listener.Addr().String(), d); code != http.StatusForbidden {
			t.Errorf("replayed request answered %d, want 403:\n%.300s", code, d)
		}
	}
	if n := real.passed.Load(); n != through {
		t.Errorf("%d replayed requests reached the real server", n-through)
	}
}

// A relay on the path that changes a request on its way (its path, its method, its body, short or
// long) gets it refused: the server acts on none of them.
func TestRelayCannotChangeRequests(t *testing.T) {
	changes := map[string]func(r *http.Request){
		"another path":   func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/api/v1/jobs/job-2/stop", "" },
		"another method": func(r *http.Request) { r.Method = http.MethodDelete },
		"another query":  func(r *http.Request) { r.URL.RawQuery = "status=RUNNING" },
		"another body":   func(r *http.Request) { swapLastByte(r) },
	}
	calls := map[string]func(c *Client) error{
		"stop": func(c *Client) error { _, err := c.Stop(context.Background(), "job-1"); return err },
		"short upload": func(c *Client) error {
			return c.UploadPackage(context.Background(), "gcs://x.zip", []byte("short body"))
		},
		"long upload": func(c *Client) error {
			return c.UploadPackage(context.Background(), "gcs://x.zip", bytes.Repeat([]byte("z"), 3<<20))
		},
	}
	for what, change := range changes {
		for call, do := range calls {
			t.Run(what+", "+call, func(t *testing.T) {
				real := newCheckingServer(t)
				relay := newRelay(t, real, func(r *http.Request) {
					if r.URL.Path != auth.ChallengePath {
						change(r)
					}
				})
				if err := do(New(real.URL, testToken, onPath(relay, real.Server))); err == nil {
					t.Error("the changed request succeeded")
				}
				if n := real.passed.Load(); n != 0 {
					t.Errorf("%d changed requests reached the server's handler", n)
				}
			})
		}
	}
}

// newRelay starts a reverse proxy to real that calls see (which may change it) on every
// request before it forwards it.
func newRelay(t *testing.T, real *realServer, see func(r *http.Request)) *httptest.Server {
	target, _ := url.Parse(real.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		see(r)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(relay.Close)
	return relay
}

// swapLastByte changes the last byte of a request's body; a request without one gets one.
func swapLastByte(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if len(body) == 0 {
		body = []byte("{}")
	} else {
		body[len(body)-1] ^= 1
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
}

// A server that restarted (or forgot the session) asks for a new one; the client starts
// it and sends the request again, once.
func TestNewSessionAfterRestart(t *testing.T) {
	handler := func() http.Handler {
		return proving(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"jobs": []}`)
		}))
	}
	var h atomic.Value
	h.Store(handler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := New(srv.URL, testToken)
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := c.sess.cur.id
	h.Store(handler()) // a new process: a new key for session IDs
	if _, err := c.List(context.Background()); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if c.sess.cur.id == first {
		t.Error("the client kept the session the restarted server forgot")
	}
}
