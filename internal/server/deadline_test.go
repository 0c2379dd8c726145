package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/store"
)

// testBodyRate is a strict pace for the tests: 300 ms of grace, then 200 bytes/s.
var testBodyRate = BodyRate{Grace: 300 * time.Millisecond, MinBytesPerSecond: 200}

// withBodyRate sets the server's BodyRate.
func withBodyRate(rate BodyRate) option { return func(c *Config) { c.BodyRate = rate } }

// A client that sends its body a byte every 100 ms (10 bytes/s) is cut off soon after
// the grace, with 408 where the handler reads the body itself, on every endpoint that
// reads one: both submits, a package upload, and the token check's own read of a
// challenge, which comes before any token.
func TestSlowBodiesAreCutOff(t *testing.T) {
	e := newEnv(t, withBodyRate(testBodyRate))
	cases := map[string]struct {
		method, path string
		token        bool
		want         int // 0: any answer or a closed connection, as long as it comes
	}{
		"native submit":       {"POST", "/api/v1/jobs", true, http.StatusRequestTimeout},
		"Ray submit":          {"POST", "/api/jobs/", true, http.StatusRequestTimeout},
		"package upload":      {"PUT", "/api/packages/gcs/_ray_pkg_0123456789abcdef.zip", true, http.StatusRequestTimeout},
		"challenge, no token": {"POST", auth.ChallengePath, false, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			status, body := trickle(t, e.web.URL, c.method, c.path, c.token, 1000, 100*time.Millisecond)
			took := time.Since(begin)
			if took > 5*time.Second {
				t.Errorf("the server held a trickled body for %s", took)
			}
			if c.want != 0 && status != c.want {
				t.Errorf("status %d (%s), want %d", status, body, c.want)
			}
			if c.want != 0 && !strings.Contains(body, "too slowly") {
				t.Errorf("the refusal %q does not say the body came too slowly", body)
			}
		})
	}
}

// trickle sends a request whose body of size bytes comes a byte per interval, until the
// server answers or closes the connection, and returns the answer (status 0: none).
func trickle(t *testing.T, base, method, path string, token bool, size int, interval time.Duration) (int, string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, u.Host, size)
	if token {
		head += "Authorization: Bearer " + testToken + "\r\n"
	}
	if _, err := conn.Write([]byte(head + "\r\n")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			resp = nil
		}
		answered <- resp
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for sent := 0; sent < size; sent++ {
		select {
		case resp := <-answered:
			return responseOf(resp)
		case <-tick.C:
			if _, err := conn.Write([]byte("{")); err != nil {
				return responseOf(<-answered)
			}
		}
	}
	t.Fatalf("the server read all %d bytes, one per %s", size, interval)
	return 0, ""
}

// responseOf returns a response's status and body; nil is (0, "").
func responseOf(resp *http.Response) (int, string) {
	if resp == nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// The pace is no limit on size or time: a body that keeps it is read whatever it takes
// (here 1.5 s, five times the grace, at 1,000 bytes/s), and requests without a body
// (the log-follow WebSocket, which stays open while the job runs) are left alone.
func TestBodiesAtPaceAndLongStreamsAreNotCut(t *testing.T) {
	e := newEnv(t, withBodyRate(testBodyRate))
	job := `{"id": "paced", "job": ` + trainJob("for i in 1 2 3 4; do echo tick $i; sleep 0.5; done") + `}`
	job += strings.Repeat(" ", 1500-len(job)) // 1,500 bytes in 1.5 s
	status, body := pace(t, e.web.URL, "/api/v1/jobs", job, 1500*time.Millisecond)
	if status != http.StatusCreated {
		t.Fatalf("a body sent at pace: %d %s, want 201", status, body)
	}
	if tail := e.readTail("/api/v1/jobs/paced/logs/tail"); !strings.Contains(tail, "tick 4") {
		t.Errorf("the log tail, open for 2 s, was cut: %q", tail)
	}
	e.waitStatus("paced", store.Succeeded)
}

// pace sends body to path, spread evenly over d, and returns the answer.
func pace(t *testing.T, base, path, body string, d time.Duration) (int, string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nAuthorization: Bearer %s\r\n\r\n",
		path, u.Host, len(body), testToken)
	const pieces = 30
	for i := range pieces {
		piece := body[i*len(body)/pieces : (i+1)*len(body)/pieces]
		if _, err := conn.Write([]byte(piece)); err != nil {
			t.Fatalf("the server stopped reading a body sent at pace: %v", err)
		}
		time.Sleep(d / pieces)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return responseOf(resp)
}

// An upload refused by its Content-Length alone is answered at once, without its body,
// when the client waits for "100 Continue" before it sends one (curl does for large
// bodies): the pace's reader does not make the server wait for a body it never asked for.
func TestRefusedUploadIsAnsweredBeforeItsBody(t *testing.T) {
	e := newEnv(t) // the default pace: 30 s of grace
	u, err := url.Parse(e.web.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /api/packages/gcs/_ray_pkg_0123456789abcdef.zip HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"+
		"Expect: 100-continue\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, 200<<20, testToken)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer without the body: %v", err)
	}
	if status, body := responseOf(resp); status != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d (%s), want 413", status, body)
	}
}
