package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/websocket"
)

// dialTail opens the log tail of a job, with the token, from a page of origin.
func (e *env) dialTail(id, origin string) (*websocket.Conn, error) {
	return e.dialTailAt("/api/jobs/"+id+"/logs/tail", origin)
}

// dialTailAt opens the log tail WebSocket at path with the token.
func (e *env) dialTailAt(path, origin string) (*websocket.Conn, error) {
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(e.web.URL, "http")+path, origin)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Header = http.Header{"Authorization": {"Bearer " + testToken}}
	return websocket.DialConfig(cfg)
}

// The tail sends the log as text messages as it grows and closes once the job has ended
// and every line is sent.
func TestRayTailFollowsLog(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": "for i in 1 2 3; do echo line $i; sleep 0.3; done; printf tail-end"})
	conn, err := e.dialTail(id, e.web.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got strings.Builder
	messages := 0
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var msg string
		err := websocket.Message.Receive(conn, &msg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v", got.String(), err)
		}
		got.WriteString(msg)
		messages++
	}
	if messages < 2 {
		t.Errorf("the log came in %d message(s); want it sent as it grew", messages)
	}
	if e.storeStatus(id) != "SUCCEEDED" {
		t.Errorf("the tail closed before the job ended")
	}
	text := got.String()
	for _, want := range []string{"line 1", "line 2", "line 3", "tail-end"} {
		if !strings.Contains(text, want) {
			t.Errorf("tail lacks %q; got:\n%s", want, text)
		}
	}
}

// Ray's clients send no Origin; a page of another site is refused, token or not.
func TestRayTailOrigin(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": "echo done"})
	e.rayWait(id, "SUCCEEDED")
	if _, err := e.dialTail(id, "http://evil.example"); err == nil {
		t.Errorf("a WebSocket from another site's page was accepted")
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.web.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /api/jobs/"+id+"/logs/tail HTTP/1.1\r\nHost: "+strings.TrimPrefix(e.web.URL, "http://")+
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"+
		"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("HTTP/1.1 101 Switching Protocols", strings.TrimSpace(status)); diff != "" {
		t.Errorf("handshake without Origin (-want +got):\n%s", diff)
	}
}

// A plain GET of the tail says it is a WebSocket.
func TestRayTailNeedsWebSocket(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": "true"})
	e.rayWait(id, "SUCCEEDED")
	r := e.request("GET", "/api/jobs/"+id+"/logs/tail", nil)
	wantStatus(t, r, http.StatusBadRequest)
	if msg := errorMessage(t, r); !strings.Contains(msg, "WebSocket") {
		t.Errorf("message %q", msg)
	}
}

func TestCutMessage(t *testing.T) {
	full := strings.Repeat("x", tailMaxChunk-1) + "é" // the last character is cut in two
	cases := map[string]struct {
		pending       string
		final         bool
		want, keeping string
	}{
		"whole lines":               {"a\nb\nc", false, "a\nb\n", "c"},
		"no newline yet":            {"abc", false, "", "abc"},
		"final sends the rest":      {"a\nbc", true, "a\nbc", ""},
		"invalid UTF-8 is replaced": {"a\xff\n", false, "a\uFFFD\n", ""},
		"full chunk, cut character": {full[:tailMaxChunk], false, full[:tailMaxChunk-1], full[tailMaxChunk-1 : tailMaxChunk]},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := []byte(c.pending)
			got := cutMessage(&p, c.final)
			if diff := cmp.Diff([]string{c.want, c.keeping}, []string{got, string(p)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A client that connects and then never reads does not hold the server: once a write has
// waited for the write timeout, the tail ends.
func TestRayTailGivesUpOnClientThatDoesNotRead(t *testing.T) {
	e := newEnv(t)
	e.srv.tailWriteTimeout = 200 * time.Millisecond
	id := e.raySubmitJob(map[string]any{"entrypoint": "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 64000000; sleep 60"})
	raw, err := net.Dial("tcp", strings.TrimPrefix(e.web.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.(*net.TCPConn).SetReadBuffer(4096)
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(e.web.URL, "http")+"/api/jobs/"+id+"/logs/tail", e.web.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header = http.Header{"Authorization": {"Bearer " + testToken}}
	conn, err := websocket.NewClient(cfg, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for deadline := time.Now().Add(5 * time.Second); e.srv.tails.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tail did not start")
		}
	}
	for deadline := time.Now().Add(60 * time.Second); e.srv.tails.Load() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tail still runs 60 s after its client stopped reading (job %s)", e.storeStatus(id))
		}
	}
	if e.storeStatus(id) != "RUNNING" {
		t.Errorf("job %s; want it still running, so that the tail ended because its client did not read", e.storeStatus(id))
	}
}
