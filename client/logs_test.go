package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/websocket"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/logstream"
)

// logServer is a fake server of one job's log. Each WebSocket connection sends the next
// of streams, message by message, then closes; the job is RUNNING until the last stream
// has been sent, then SUCCEEDED. GET .../logs answers logs[i] at its i-th call (the last
// one after that).
type logServer struct {
	mu      sync.Mutex
	streams [][]string
	logs    []string
	reads   int
	dials   int
	auth    []string // the Authorization header of each WebSocket
	tailIDs []string // the job ID in each WebSocket's path
}

func (s *logServer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); id != "job-1" && id != "mnist" { // mnist is the job's name
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": "get job \"` + r.PathValue("id") + `\": job not found"}`))
			return
		}
		s.mu.Lock()
		status := StatusRunning
		if s.dials >= len(s.streams) && s.reads >= len(s.logs) {
			status = StatusSucceeded
		}
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(JobDetail{Job: Job{ID: "job-1", Status: status}})
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		text := ""
		if len(s.logs) > 0 {
			text = s.logs[min(s.reads, len(s.logs)-1)]
		}
		s.reads++
		s.mu.Unlock()
		_, _ = w.Write([]byte(text))
	})
	mux.Handle("GET /api/v1/jobs/{id}/logs/tail", websocket.Handler(func(conn *websocket.Conn) {
		defer conn.Close()
		s.mu.Lock()
		msgs := s.streams[min(s.dials, len(s.streams)-1)]
		s.dials++
		s.auth = append(s.auth, conn.Request().Header.Get("Authorization"))
		s.tailIDs = append(s.tailIDs, conn.Request().PathValue("id"))
		s.mu.Unlock()
		for _, m := range msgs {
			if err := websocket.Message.Send(conn, m); err != nil {
				return
			}
		}
	}))
	return mux
}

// follow runs Follow against the server and returns what it wrote.
func (s *logServer) follow(id string, opts LogOptions) (string, error) {
	web := httptest.NewServer(proving(s.routes()))
	defer web.Close()
	c := New(web.URL, testToken, WithPollInterval(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := c.Follow(ctx, id, &out, opts)
	return out.String(), err
}

func TestFollowConsole(t *testing.T) {
	cases := map[string]struct {
		streams [][]string
		logs    []string
		tail    int
		want    string
	}{
		"the whole log, message by message": {
			streams: [][]string{{"a\n", "b\nc\n", "last without newline"}},
			want:    "a\nb\nc\nlast without newline",
		},
		"a broken stream goes on where it stopped": {
			streams: [][]string{{"1\n", "2\npart"}, {"1\n2\npartial\n", "3\n"}},
			want:    "1\n2\npartial\n3\n",
		},
		"tail: the last lines, then what the stream adds": {
			logs:    []string{"1\n2\n3\npart"},
			streams: [][]string{{"1\n2\n3\n", "partial\n4\n"}},
			tail:    2,
			want:    "2\n3\npartial\n4\n",
		},
		"tail longer than the log": {
			logs:    []string{"1\n2\n"},
			streams: [][]string{{"1\n2\n3\n"}},
			tail:    10,
			want:    "1\n2\n3\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &logServer{streams: tc.streams, logs: tc.logs}
			got, err := s.follow("job-1", LogOptions{Tail: tc.tail})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("wrote %q, want %q", got, tc.want)
			}
			for _, a := range s.auth {
				if !strings.HasPrefix(a, auth.ProofScheme+" ") || strings.Contains(a, testToken) {
					t.Errorf("WebSocket Authorization %q, want a proof, never the token", a)
				}
			}
		})
	}
}

func TestFollowUnknownJob(t *testing.T) {
	s := &logServer{streams: [][]string{{"x\n"}}}
	_, err := s.follow("nope", LogOptions{})
	if !IsNotFound(err) {
		t.Errorf("error %v, want the server's 404", err)
	}
	if s.dials != 0 {
		t.Errorf("%d WebSocket connections for an unknown job, want none", s.dials)
	}
}

func TestFollowRank(t *testing.T) {
	rank := 0
	cases := map[string]struct {
		logs []string
		tail int
		want string
	}{
		"what each read adds": {
			logs: []string{"", "a\n", "a\nb\npart", "a\nb\npartial\n"},
			want: "a\nb\npartial\n",
		},
		"tail, then what each read adds": {
			logs: []string{"1\n2\n3\np", "1\n2\n3\npq\n4\n"},
			tail: 1,
			want: "3\npq\n4\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &logServer{logs: tc.logs}
			got, err := s.follow("job-1", LogOptions{Rank: &rank, Tail: tc.tail})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("wrote %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResumeWriter(t *testing.T) {
	cases := map[string]struct {
		done    position
		streams [][]string // each stream's writes, from the log's start
		want    string
	}{
		"one stream": {
			streams: [][]string{{"a\nb", "c\n"}},
			want:    "a\nbc\n",
		},
		"a second stream adds only what is new": {
			streams: [][]string{{"a\nb"}, {"a\n", "bc\nd\n"}},
			want:    "a\nbc\nd\n",
		},
		"a shorter second stream adds nothing": {
			streams: [][]string{{"a\nb\nc\n"}, {"a\n"}},
			want:    "a\nb\nc\n",
		},
		"skip lines already shown": {
			done:    position{lines: 2},
			streams: [][]string{{"a\nb\nc\n"}},
			want:    "c\n",
		},
		"invalid UTF-8 rewritten by the server keeps the place": {
			streams: [][]string{{"\xff\xfe\n"}, {"\uFFFD\n", "x\n"}},
			want:    "\xff\xfe\nx\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			r := &resumeWriter{w: &out, done: tc.done}
			for _, stream := range tc.streams {
				r.restart()
				for _, w := range stream {
					if n, err := r.Write([]byte(w)); err != nil || n != len(w) {
						t.Fatalf("Write(%q) = %d, %v", w, n, err)
					}
				}
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("written (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	cases := map[string]struct {
		text string
		n    int
		want string
	}{
		"fewer lines":   {text: "a\nb\n", n: 5, want: "a\nb\n"},
		"the last two":  {text: "a\nb\nc\n", n: 2, want: "b\nc\n"},
		"the last one":  {text: "a\nb\nc\n", n: 1, want: "c\n"},
		"empty":         {text: "", n: 3, want: ""},
		"one line only": {text: "a\n", n: 1, want: "a\n"},
	}
	for name, tc := range cases {
		if got := logstream.LastLines(tc.text, tc.n); got != tc.want {
			t.Errorf("%s: logstream.LastLines(%q, %d) = %q, want %q", name, tc.text, tc.n, got, tc.want)
		}
	}
}

// An https server with a private CA: requests and the log's wss stream both trust it
// through WithTLSConfig.
func TestFollowOverTLS(t *testing.T) {
	s := &logServer{streams: [][]string{{"secure\n"}}}
	web := httptest.NewTLSServer(proving(s.routes()))
	defer web.Close()
	pool := x509.NewCertPool()
	pool.AddCert(web.Certificate())
	c := New(web.URL, testToken, WithTLSConfig(&tls.Config{RootCAs: pool}), WithPollInterval(time.Millisecond))
	var out bytes.Buffer
	if err := c.Follow(context.Background(), "job-1", &out, LogOptions{}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "secure\n" {
		t.Errorf("wrote %q, want the log", out.String())
	}
	if _, err := New(web.URL, testToken).Get(context.Background(), "job-1"); err == nil {
		t.Error("a client without the CA trusted the server")
	}
}

// Follow finds a job by its name as by its ID, and streams the log of that job's ID (Ray's
// log tail, which the stream reads, takes IDs only).
func TestFollowByName(t *testing.T) {
	s := &logServer{streams: [][]string{{"a\n", "b\n"}}}
	got, err := s.follow("mnist", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "a\nb\n" || !cmp.Equal(s.tailIDs, []string{"job-1"}) {
		t.Errorf("Follow(mnist) wrote %q from the log tails of %q, want \"a\\nb\\n\" from job-1's", got, s.tailIDs)
	}
}
