package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/auth"
)

// testToken is a well-formed token (at least 32 characters of the Bearer alphabet).
const testToken = "dGVzdC10b2tlbi1mb3ItdGhlLXRyYWlueWFyZC1jbGllbnQ"

// seen is what a fake server saw of one request.
type seen struct {
	Method, Path, Query, Auth, Body string
}

// recorder is a fake server that records every request and answers each with the same
// status and body.
type recorder struct {
	mu       sync.Mutex
	requests []seen
	status   int
	body     string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.requests = append(rec.requests, seen{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Auth: r.Header.Get("Authorization"), Body: strings.TrimSpace(string(body))})
	status, answer := rec.status, rec.body
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// last returns the last request the recorder saw.
func (rec *recorder) last(t *testing.T) seen {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) == 0 {
		t.Fatal("the server saw no request")
	}
	return rec.requests[len(rec.requests)-1]
}

// proving puts h behind the checks of a trainyard server with the tests' token, which
// answer a client's challenge and check its proofs.
func proving(h http.Handler) http.Handler {
	return auth.Middleware(testToken, auth.Options{}, h)
}

// newRecorder starts a fake server that checks requests as a trainyard server does and
// answers status and body.
func newRecorder(t *testing.T, status int, body string) (*recorder, *httptest.Server) {
	t.Helper()
	rec := &recorder{status: status, body: body}
	srv := httptest.NewServer(proving(rec))
	t.Cleanup(srv.Close)
	return rec, srv
}

// The client proves that it holds the token, and never sends it; WithBearer sends it.
func TestAuthorizationHeader(t *testing.T) {
	cases := map[string]struct {
		token  string
		opts   []Option
		want   string // the header's start
		prove  bool   // through a server that checks proofs
		secret bool   // the token may appear
	}{
		"a proof, never the token": {token: testToken, want: auth.ProofScheme + " session=", prove: true},
		"WithBearer: the token":    {token: testToken, opts: []Option{WithBearer()}, want: "Bearer " + testToken, secret: true},
		"no token, no header":      {token: "", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{status: http.StatusOK, body: `{"jobs": []}`}
			var h http.Handler = rec
			if tc.prove {
				h = proving(rec)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			if _, err := New(srv.URL, tc.token, tc.opts...).List(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := rec.last(t).Auth
			if !strings.HasPrefix(got, tc.want) || tc.want == "" && got != "" {
				t.Errorf("Authorization %q, want one that starts %q", got, tc.want)
			}
			if !tc.secret && tc.token != "" && strings.Contains(got, tc.token) {
				t.Errorf("Authorization %q holds the token", got)
			}
		})
	}
}

func TestAPIError(t *testing.T) {
	cases := map[string]struct {
		status int
		body   string
		want   APIError
	}{
		"the server's message": {
			status: 404, body: `{"error": "get job \"x\": job not found"}` + "\n",
			want: APIError{Status: 404, Message: `get job "x": job not found`},
		},
		"a message of several lines becomes one": {
			status: 400, body: `{"error": "spec.workers: must be 1 or more\nspec.command: required"}`,
			want: APIError{Status: 400, Message: "spec.workers: must be 1 or more; spec.command: required"},
		},
		"not JSON: the status and the first line": {
			status: 502, body: "upstream down\nretry later",
			want: APIError{Status: 502, Message: "the server answered 502 Bad Gateway: upstream down"},
		},
		"empty body: the status": {
			status: 500, body: "",
			want: APIError{Status: 500, Message: "the server answered 500 Internal Server Error"},
		},
		"JSON without error": {
			status: 401, body: `{"detail": "no"}`,
			want: APIError{Status: 401, Message: `the server answered 401 Unauthorized: {"detail": "no"}`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, srv := newRecorder(t, tc.status, tc.body)
			_, err := New(srv.URL, testToken).Get(context.Background(), "x")
			var got *APIError
			if !errors.As(err, &got) {
				t.Fatalf("error %v (%T), want an *APIError", err, err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			if err.Error() != tc.want.Message {
				t.Errorf("Error() = %q, want the message %q", err.Error(), tc.want.Message)
			}
			if IsNotFound(err) != (tc.status == 404) {
				t.Errorf("IsNotFound = %v for status %d", IsNotFound(err), tc.status)
			}
		})
	}
}

// Every call sends the method, path, query and body the native API documents.
func TestRequests(t *testing.T) {
	rank := 1
	cases := map[string]struct {
		status int
		call   func(*Client) error
		want   seen
	}{
		"list": {status: 200, call: func(c *Client) error { _, err := c.List(context.Background()); return err },
			want: seen{Method: "GET", Path: "/api/v1/jobs"}},
		"list by status": {status: 200, call: func(c *Client) error {
			_, err := c.List(context.Background(), StatusPending, StatusRunning)
			return err
		}, want: seen{Method: "GET", Path: "/api/v1/jobs", Query: "status=PENDING%2CRUNNING"}},
		"get": {status: 200, call: func(c *Client) error { _, err := c.Get(context.Background(), "job-1"); return err },
			want: seen{Method: "GET", Path: "/api/v1/jobs/job-1"}},
		"get escapes the ID": {status: 200, call: func(c *Client) error { _, err := c.Get(context.Background(), "a/b c"); return err },
			want: seen{Method: "GET", Path: "/api/v1/jobs/a%2Fb%20c"}},
		"stop": {status: 200, call: func(c *Client) error { _, err := c.Stop(context.Background(), "job-1"); return err },
			want: seen{Method: "POST", Path: "/api/v1/jobs/job-1/stop"}},
		"delete": {status: 204, call: func(c *Client) error { return c.Delete(context.Background(), "job-1") },
			want: seen{Method: "DELETE", Path: "/api/v1/jobs/job-1"}},
		"logs of a rank, tail": {status: 200, call: func(c *Client) error {
			_, err := c.Logs(context.Background(), "job-1", LogOptions{Rank: &rank, Tail: 5})
			return err
		}, want: seen{Method: "GET", Path: "/api/v1/jobs/job-1/logs", Query: "rank=1&tail=5"}},
		"node": {status: 200, call: func(c *Client) error { _, err := c.Node(context.Background()); return err },
			want: seen{Method: "GET", Path: "/api/v1/node"}},
		"version": {status: 200, call: func(c *Client) error { _, err := c.Version(context.Background()); return err },
			want: seen{Method: "GET", Path: "/api/version"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec, srv := newRecorder(t, tc.status, `{}`)
			if err := tc.call(New(srv.URL, testToken)); err != nil {
				t.Fatal(err)
			}
			got := rec.last(t)
			got.Auth = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoJobID(t *testing.T) {
	rec, srv := newRecorder(t, 200, `{}`)
	c := New(srv.URL, testToken)
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := c.Get(context.Background(), " "); return err },
		"stop":   func() error { _, err := c.Stop(context.Background(), ""); return err },
		"delete": func() error { return c.Delete(context.Background(), "") },
		"logs":   func() error { _, err := c.Logs(context.Background(), "", LogOptions{}); return err },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "no job ID") {
			t.Errorf("%s without an ID: error %v, want one that says there is no job ID", name, err)
		}
	}
	if len(rec.requests) != 0 {
		t.Errorf("the server saw %d requests, want none", len(rec.requests))
	}
}

func TestAddress(t *testing.T) {
	cases := map[string]struct {
		address string
		want    string // Address(); empty when unusable
		wantErr string
	}{
		"URL":                      {address: "http://127.0.0.1:8265", want: "http://127.0.0.1:8265"},
		"trailing slash":           {address: "https://gpu-box:8265/", want: "https://gpu-box:8265"},
		"host:port means http":     {address: "127.0.0.1:9000", want: "http://127.0.0.1:9000"},
		"IPv6":                     {address: "[::1]:8265", want: "http://[::1]:8265"},
		"another scheme":           {address: "ftp://host:21", wantErr: "the scheme must be http or https"},
		"a path is not an address": {address: "http://host:8265/api", wantErr: "scheme, host and port only"},
		"no host":                  {address: "http://", wantErr: "has no host"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := New(tc.address, testToken)
			if got := c.Address(); got != tc.want {
				t.Errorf("Address() = %q, want %q", got, tc.want)
			}
			_, err := c.List(context.Background())
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one that says %q", err, tc.wantErr)
			}
		})
	}
}

func TestResolveAddress(t *testing.T) {
	cases := map[string]struct {
		flag, env string
		want      string
	}{
		"the flag wins":         {flag: "http://a:1", env: "http://b:2", want: "http://a:1"},
		"else the environment":  {env: "http://b:2", want: "http://b:2"},
		"else this machine":     {want: DefaultAddress},
		"blank counts as unset": {flag: " ", env: " ", want: DefaultAddress},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvAddress, tc.env)
			if got := ResolveAddress(tc.flag); got != tc.want {
				t.Errorf("ResolveAddress(%q) with %s=%q: %q, want %q", tc.flag, EnvAddress, tc.env, got, tc.want)
			}
		})
	}
}

func TestResolveToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tok string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(tok+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flagFile := write("flag-token", "flag-"+testToken, 0o600)
	envFile := write("env-token", "file-"+testToken, 0o600)
	open := write("open-token", testToken, 0o644)
	cases := map[string]struct {
		flag, envToken, envFile string
		want, wantErr           string
	}{
		"--token-file wins":              {flag: flagFile, envToken: "env-" + testToken, envFile: envFile, want: "flag-" + testToken},
		"then TRAINYARD_TOKEN":           {envToken: "env-" + testToken, envFile: envFile, want: "env-" + testToken},
		"then TRAINYARD_TOKEN_FILE":      {envFile: envFile, want: "file-" + testToken},
		"a missing file says what to do": {envFile: filepath.Join(dir, "none"), wantErr: "set TRAINYARD_TOKEN to its token"},
		"a file others may read":         {flag: open, wantErr: "chmod 600"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvToken, tc.envToken)
			t.Setenv("TRAINYARD_TOKEN_FILE", tc.envFile)
			got, err := ResolveToken(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one that says %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveToken(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = New(addr, testToken).List(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no trainyard server at http://"+addr) {
		t.Errorf("error %v, want one that says no server is at %s", err, addr)
	}
	var ae *APIError
	if errors.As(err, &ae) {
		t.Errorf("a server that does not answer gave an APIError: %v", ae)
	}
}
