package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trainyard/trainyard/internal/auth"
)

// listener is an HTTP server that checks requests as a trainyard server does (the token
// of the tests), records the Authorization header of each request that passes, and
// answers those with an empty job list.
type listener struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newListener(t *testing.T) *listener {
	l := &listener{}
	l.Server = httptest.NewServer(proving(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Header.Get("Authorization"))
		l.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jobs": []}`))
	})))
	t.Cleanup(l.Close)
	return l
}

// authorization returns the Authorization headers the listener got, and forgets them.
func (l *listener) authorization() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.seen
	l.seen = nil
	return seen
}

// The token found in the token file goes only to the servers that file belongs to; a
// token the user gives goes wherever the user points it.
func TestConnectSendsTokenFileOnlyToItsServers(t *testing.T) {
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	explicit := filepath.Join(dir, "explicit")
	if err := os.WriteFile(explicit, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serverA, other := newListener(t), newListener(t)
	addrA, addrB := strings.TrimPrefix(serverA.URL, "http://"), strings.TrimPrefix(other.URL, "http://")
	t.Setenv(auth.EnvTokenFile, tokenPath)

	cases := []struct {
		name      string
		record    []string // servers recorded beside the token, none: a legacy token file
		env       string   // $TRAINYARD_TOKEN
		tokenFile string   // --token-file
		address   string
		want      bool // a request signed with the token arrived
		wantErr   string
	}{
		{name: "the token file's server", record: []string{addrA}, address: serverA.URL, want: true},
		{name: "another address", record: []string{addrA}, address: other.URL,
			wantErr: "the token in " + tokenPath + " belongs to " + addrA + ", not " + addrB + "; pass --token-file (or TRAINYARD_TOKEN) to send it there"},
		{name: "host:port", record: []string{addrA}, address: addrB, wantErr: "belongs to " + addrA + ", not " + addrB},
		{name: "--token-file", record: []string{addrA}, tokenFile: explicit, address: other.URL, want: true},
		{name: "TRAINYARD_TOKEN", record: []string{addrA}, env: testToken, address: other.URL, want: true},
		{name: "two servers", record: []string{addrA, addrB}, address: other.URL, want: true},
		{name: "legacy file", address: other.URL, wantErr: "belongs to 127.0.0.1:8265, not " + addrB},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(auth.ServersPath(tokenPath))
			for _, a := range c.record {
				if err := auth.RecordServer(tokenPath, a); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(EnvToken, c.env)
			cl, err := Connect(c.address, c.tokenFile)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.List(context.Background())
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if c.wantErr == "" && err != nil || !strings.Contains(gotErr, c.wantErr) {
				t.Errorf("List: %v; want an error that says %q", err, c.wantErr)
			}
			arrived := append(serverA.authorization(), other.authorization()...)
			if got := len(arrived) == 1; got != c.want {
				t.Errorf("signed requests that arrived: %q; want one: %v", arrived, c.want)
			}
			for _, a := range arrived {
				if !strings.HasPrefix(a, auth.ProofScheme+" ") || strings.Contains(a, testToken) {
					t.Errorf("Authorization %q: want a proof, never the token", a)
				}
			}
		})
	}
}
