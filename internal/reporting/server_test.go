package reporting

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// listen starts a Server for h and closes it when the test ends.
func listen(t *testing.T, h Handler) *Server {
	t.Helper()
	s, err := Listen(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// request returns a request line of rank 0 with the metric n and the given checkpoint
// (null when "") and extra metrics, as the helper writes it.
func request(n int, checkpoint string, extra string) string {
	cp := "null"
	if checkpoint != "" {
		cp = fmt.Sprintf("%q", checkpoint)
	}
	return fmt.Sprintf(`{"op": "report", "rank": 0, "metrics": {"n": %d%s}, "checkpoint": %s}`, n, extra, cp)
}

// TestServerReplies checks each reply line byte for byte: exactly the protocol's keys.
func TestServerReplies(t *testing.T) {
	cases := map[string]struct {
		line string
		want string
	}{
		"no checkpoint":   {line: request(7, "", ""), want: `{"checkpoint":null,"iteration":7,"ok":true}`},
		"checkpoint":      {line: request(1, "/tmp/x", ""), want: `{"checkpoint":"ckpt","iteration":1,"ok":true}`},
		"handler refuses": {line: request(2, "", `, "fail": 1`), want: `{"error":"refused \u003cby the fake\u003e","ok":false}`},
		"bad metric": {line: request(3, "", `, "loss": "high"`),
			want: `{"error":"report: metric \"loss\": \"high\" is not a number; metrics must be numbers","ok":false}`},
		"not JSON":   {line: "hello", want: `{"error":"bad request: invalid character 'h' looking for beginning of value","ok":false}`},
		"empty line": {line: "", want: `{"error":"bad request: unexpected end of JSON input","ok":false}`},
	}
	s := listen(t, &fakeHandler{})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := dial(t, s.Path).roundTrip(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reply to %s (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}

// TestReplyKeys checks the keys of both kinds of reply, as the helper reads them.
func TestReplyKeys(t *testing.T) {
	cases := map[string]struct {
		reply Reply
		want  map[string]any
	}{
		"ok":              {reply: Reply{OK: true, Iteration: 3}, want: map[string]any{"ok": true, "iteration": 3.0, "checkpoint": nil}},
		"ok, checkpoint":  {reply: Reply{OK: true, Iteration: 3, Checkpoint: "checkpoint_000003"}, want: map[string]any{"ok": true, "iteration": 3.0, "checkpoint": "checkpoint_000003"}},
		"error":           {reply: Reply{Error: "no", Iteration: 3, Checkpoint: "c"}, want: map[string]any{"ok": false, "error": "no"}},
		"error, no error": {reply: Reply{}, want: map[string]any{"ok": false, "error": ""}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := json.Marshal(tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reply %s (-want +got):\n%s", data, diff)
			}
		})
	}
}

// TestServerManyRequestsOneConnection sends requests one after the other on one
// connection, and then all of them at once, as pipelined lines.
func TestServerManyRequestsOneConnection(t *testing.T) {
	h := &fakeHandler{}
	c := dial(t, listen(t, h).Path)
	for n := 1; n <= 50; n++ {
		got, err := c.roundTrip(request(n, "", ""))
		if want := fmt.Sprintf(`{"checkpoint":null,"iteration":%d,"ok":true}`, n); err != nil || got != want {
			t.Fatalf("request %d: reply %q, %v; want %q", n, got, err, want)
		}
	}
	var batch strings.Builder
	for n := 51; n <= 100; n++ {
		batch.WriteString(request(n, "", "") + "\n")
	}
	if _, err := c.conn.Write([]byte(batch.String())); err != nil {
		t.Fatal(err)
	}
	for n := 51; n <= 100; n++ {
		got, err := c.readLine()
		if want := fmt.Sprintf(`{"checkpoint":null,"iteration":%d,"ok":true}`, n); err != nil || got != want {
			t.Fatalf("pipelined request %d: reply %q, %v; want %q", n, got, err, want)
		}
	}
	if got := len(h.got()); got != 100 {
		t.Errorf("handler got %d reports, want 100", got)
	}
}

// TestServerConcurrentConnections has several connections report at the same time; each
// gets the replies to its own requests, in order.
func TestServerConcurrentConnections(t *testing.T) {
	const conns, perConn = 8, 40
	h := &fakeHandler{}
	s := listen(t, h)
	var wg sync.WaitGroup
	for i := range conns {
		c := dial(t, s.Path)
		wg.Go(func() {
			for j := range perConn {
				n := i*1000 + j
				got, err := c.roundTrip(request(n, "", ""))
				if want := fmt.Sprintf(`{"checkpoint":null,"iteration":%d,"ok":true}`, n); err != nil || got != want {
					t.Errorf("connection %d, request %d: reply %q, %v; want %q", i, j, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	var got []int
	for _, r := range h.got() {
		got = append(got, int(r.Metrics["n"]))
	}
	var want []int
	for i := range conns {
		for j := range perConn {
			want = append(want, i*1000+j)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b int) bool { return a < b })); diff != "" {
		t.Errorf("reports the handler got (-want +got):\n%s", diff)
	}
}

// TestServerLongRequest checks the limit on a request's length: a line of
// MaxRequestBytes with its newline is served, a longer one gets an error reply and the
// connection is closed.
func TestServerLongRequest(t *testing.T) {
	cases := map[string]struct {
		length  int // of the line without its newline
		want    string
		thenEOF bool
	}{
		"at the limit": {length: MaxRequestBytes - 1, want: `{"checkpoint":"ckpt","iteration":1,"ok":true}`},
		"over the limit": {length: MaxRequestBytes,
			want: `{"error":"request longer than 1048576 bytes; report fewer or shorter metrics","ok":false}`, thenEOF: true},
		"far over the limit": {length: 3 * MaxRequestBytes,
			want: `{"error":"request longer than 1048576 bytes; report fewer or shorter metrics","ok":false}`, thenEOF: true},
	}
	h := &fakeHandler{}
	s := listen(t, h)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, s.Path)
			line := paddedRequest(tc.length)
			// The server stops reading a line that is too long, so the write may fail.
			go c.conn.Write([]byte(line + "\n"))
			if err := c.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			got, err := c.readLine()
			if err != nil || got != tc.want {
				t.Fatalf("reply %q, %v; want %q", got, err, tc.want)
			}
			if !tc.thenEOF {
				return
			}
			if rest, err := c.readLine(); !ended(err) {
				t.Errorf("after the error reply: read %q, %v; want the connection closed", rest, err)
			}
		})
	}
}

// ended reports whether a read error says that the server closed the connection: EOF, or
// a reset when the server closed it with data unread.
func ended(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// paddedRequest returns a request line of exactly n bytes, padded in its checkpoint path.
func paddedRequest(n int) string {
	short := request(1, "/", "")
	return request(1, "/"+strings.Repeat("p", n-len(short)), "")
}

// TestServerClose checks that Close ends open connections and removes the socket and
// its folder.
func TestServerClose(t *testing.T) {
	s, err := Listen(&fakeHandler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.Path)
	if _, err := c.roundTrip(request(1, "", "")); err != nil {
		t.Fatal(err)
	}
	idle := dial(t, s.Path) // connected, never sends
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with connections open")
	}
	for i, conn := range []*client{c, idle} {
		if err := conn.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if line, err := conn.readLine(); !ended(err) {
			t.Errorf("connection %d after Close: read %q, %v; want the connection closed", i, line, err)
		}
	}
	if _, err := os.Stat(filepath.Dir(s.Path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket folder after Close: %v; want it gone", err)
	}
	if conn, err := net.Dial("unix", s.Path); err == nil {
		conn.Close()
		t.Error("dial after Close succeeded")
	}
}

// TestServerCloseWhileConnecting closes servers while clients keep connecting; Close must
// return every time (a connection accepted during Close must not keep it waiting).
func TestServerCloseWhileConnecting(t *testing.T) {
	for range 20 {
		s, err := Listen(&fakeHandler{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var open []net.Conn
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if conn, err := net.Dial("unix", s.Path); err == nil {
					mu.Lock()
					open = append(open, conn) // kept open, as the helper keeps its connection
					mu.Unlock()
				}
			}
		})
		time.Sleep(2 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close hung while clients were connecting")
		}
		close(stop)
		wg.Wait()
		for _, conn := range slices.Clip(open) {
			conn.Close()
		}
	}
}
