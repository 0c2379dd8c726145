package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/server"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/testrelay"
	"github.com/trainyard/trainyard/internal/upload"
)

// A relay on an address still listed in the token's servers file (another user holds a
// port a server once listened on, and passes the bytes on to the real server) reads no
// job list and gets no sign-in link: the server's proof is for its own address, not the
// relay's, so the CLI stops after the challenge. At the server's own address both work.
func TestRelayOnListedAddress(t *testing.T) {
	api := startSignInAPI(t)
	serverAddr := strings.TrimPrefix(api.url, "http://")
	relay := testrelay.New(t, serverAddr)
	tokenPath := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenPath, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{relay.Addr, serverAddr} {
		if err := auth.RecordServer(tokenPath, addr); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(auth.EnvTokenFile, tokenPath)
	t.Setenv("TRAINYARD_TOKEN", "")

	for _, args := range [][]string{{"list"}, {"open", "--print"}} {
		code, out, errOut := trainyard(append(args, "--address", "http://"+relay.Addr)...)
		if code != 1 || out != "" || !strings.Contains(errOut, "the trainyard server's proof is for "+serverAddr+
			", where the connection arrived, but this client reached "+relay.Addr) {
			t.Errorf("%v through the relay: exit %d, stdout %q, stderr %q; want exit 1 and the relay named", args, code, out, errOut)
		}
	}
	sent := relay.Sent()
	if !bytes.Contains(sent, []byte("POST "+auth.ChallengePath+" ")) {
		t.Fatal("the relay passed no challenge on; the test proves nothing")
	}
	if bytes.Contains(bytes.ToLower(sent), []byte("authorization:")) || bytes.Contains(sent, []byte(auth.SignInPath)) {
		t.Errorf("the relay passed on more than challenges:\n%s", sent)
	}
	if code, out, errOut := trainyard("list", "--address", api.url); code != 0 || out != "No jobs.\n" {
		t.Errorf("list at the server's own address: exit %d, %q, %q", code, out, errOut)
	}
	if code := signInCode(t, api.url); !api.signIns.Redeem(code) {
		t.Error("the link's code from the server's own address does not sign in")
	}
}

// The sign-in code travels sealed to the session that asked for it: nothing in the
// server's answer signs in, and only the CLI that holds the session's key opens it.
func TestSignInCodeSealed(t *testing.T) {
	api := startSignInAPI(t)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	code := signInCode(t, api.url)
	answers := api.answers()
	if len(answers) != 1 {
		t.Fatalf("%d answers to %s, want 1", len(answers), auth.SignInPath)
	}
	if bytes.Contains(answers[0], []byte(code)) {
		t.Fatalf("the answer holds the code in clear text: %s", answers[0])
	}
	var ans map[string]any
	if err := json.Unmarshal(answers[0], &ans); err != nil {
		t.Fatal(err)
	}
	for k, v := range ans {
		if s, ok := v.(string); ok && api.signIns.Redeem(s) {
			t.Errorf("the answer's %s signs in", k)
		}
	}
	if !api.signIns.Redeem(code) {
		t.Error("the code the CLI opened does not sign in")
	}
}

// signInCode runs 'trainyard open --print' at address and returns the code of its link.
func signInCode(t *testing.T, address string) string {
	t.Helper()
	code, out, errOut := trainyard("open", "--print", "--address", address)
	link, _, _ := strings.Cut(out, "\n")
	prefix := address + auth.LoginPath + "#code="
	if code != 0 || !strings.HasPrefix(link, prefix) {
		t.Fatalf("open --print: exit %d, %q, %q; want a link %s...", code, out, errOut, prefix)
	}
	return strings.TrimPrefix(link, prefix)
}

// signInAPI is the real HTTP API with dashboard sign-ins, whose answers to SignInPath are
// recorded as they leave the server.
type signInAPI struct {
	url     string
	signIns *auth.SignIns
	mu      sync.Mutex
	bodies  [][]byte
}

func (a *signInAPI) answers() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bodies
}

func startSignInAPI(t *testing.T) *signInAPI {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "jobs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	node := scheduler.Node{MilliCPU: 2000, MemoryBytes: 1 << 30}
	svc, err := jobs.New(jobs.Config{Store: st, Node: node, StateDir: dir, Binary: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := upload.NewStore(filepath.Join(dir, "packages"))
	if err != nil {
		t.Fatal(err)
	}
	a := &signInAPI{signIns: auth.NewSignIns(nil)}
	srv, err := server.New(server.Config{Jobs: svc, Token: testToken, Packages: pkgs, StateDir: filepath.Join(dir, "state"),
		StoragePath: filepath.Join(dir, "runs"), Node: server.NodeConfig{Resources: node}, SignIns: a.signIns})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != auth.SignInPath {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		a.mu.Lock()
		a.bodies = append(a.bodies, rec.Body.Bytes())
		a.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(web.Close)
	a.url = web.URL
	return a
}
