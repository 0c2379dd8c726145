package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// session is a client's side of a session with a prover, for tests.
type testSession struct {
	id, nonce string
	key       []byte
}

func startSession(t *testing.T, h http.Handler) testSession {
	t.Helper()
	nonce := NewNonce()
	body, _ := json.Marshal(ChallengeRequest{ClientNonce: nonce})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, localRequest("POST", ChallengePath, bytes.NewReader(body)))
	var ans ChallengeAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || w.Code != 200 {
		t.Fatalf("challenge: %d %s", w.Code, w.Body)
	}
	if ans.ServerProof != ServerProof(serverToken, nonce, ans.Session, "") {
		t.Fatal("the server's proof does not prove the token")
	}
	return testSession{id: ans.Session, nonce: nonce, key: SessionKey(serverToken, nonce, ans.Session)}
}

// signed sends a request signed in s with seq and returns its status.
func (s testSession) signed(h http.Handler, method, target string, seq uint64, body []byte) int {
	return s.send(h, method, target, seq, body).Code
}

// send sends a request signed in s with seq and returns the answer.
func (s testSession) send(h http.Handler, method, target string, seq uint64, body []byte) *httptest.ResponseRecorder {
	r := localRequest(method, target, bytes.NewReader(body))
	if body == nil {
		r = localRequest(method, target, nil)
	}
	hash := BodyHash(body)
	r.Header.Set("Authorization", Proof{Session: s.id, Nonce: s.nonce, Seq: seq, Body: hash,
		Sig: Sign(s.key, method, r.RequestURI, seq, hash)}.Header())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func reading() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.WriteHeader(http.StatusForbidden)
		}
	})
}

// Each signed request is accepted once, within a window of out-of-order arrivals.
func TestProofReplayWindow(t *testing.T) {
	h := Middleware(serverToken, Options{}, reading())
	s := startSession(t, h)
	steps := []struct {
		seq  uint64
		want int
	}{
		{1, 200}, {1, 403}, {3, 200}, {2, 200}, {2, 403}, {3, 403},
		{2000, 200}, {1500, 200}, {976, 403}, {977, 200}, {977, 403}, {2000, 403},
	}
	for _, st := range steps {
		if got := s.signed(h, "GET", "/api/v1/jobs", st.seq, nil); got != st.want {
			t.Errorf("seq %d: %d, want %d", st.seq, got, st.want)
		}
	}
}

// A number far ahead of the session's (the largest, 2^64-1, say) is refused as stale, and
// the session goes on with its own numbers.
func TestProofSeqFarAhead(t *testing.T) {
	h := Middleware(serverToken, Options{}, reading())
	s := startSession(t, h)
	steps := []struct {
		seq  uint64
		want int
	}{
		{1, 200}, {math.MaxUint64, 401}, {2, 200}, {2 + maxSeqJump + 1, 401}, {3, 200},
		{3 + maxSeqJump, 200}, {4, 403}, {3 + maxSeqJump - 1, 200},
	}
	for _, st := range steps {
		if got := s.signed(h, "GET", "/api/v1/jobs", st.seq, nil); got != st.want {
			t.Errorf("seq %d: %d, want %d", st.seq, got, st.want)
		}
	}
}

// The server proves the token for the address its connection arrived at, the one the
// client reached: a proof passed on by a relay at another address does not verify there.
func TestProofCoversAddress(t *testing.T) {
	h := Middleware(serverToken, Options{}, reading())
	cases := map[string]struct {
		local net.Addr
		want  string
	}{
		"IPv4":        {&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8265}, "127.0.0.1:8265"},
		"IPv4-mapped": {&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 8265}, "127.0.0.1:8265"},
		"IPv6 zone":   {&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 8265}, "[fe80::1]:8265"},
	}
	for name, tc := range cases {
		nonce := NewNonce()
		body, _ := json.Marshal(ChallengeRequest{ClientNonce: nonce})
		r := localRequest("POST", ChallengePath, bytes.NewReader(body))
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var ans ChallengeAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || w.Code != 200 {
			t.Fatalf("%s: challenge: %d %s", name, w.Code, w.Body)
		}
		if ans.Address != tc.want || ConnAddr(tc.local) != tc.want {
			t.Errorf("%s: address %q (ConnAddr %q), want %q", name, ans.Address, ConnAddr(tc.local), tc.want)
		}
		if ans.ServerProof != ServerProof(serverToken, nonce, ans.Session, tc.want) {
			t.Errorf("%s: the proof does not verify at the server's own address", name)
		}
		for _, relay := range []string{"127.0.0.1:9000", "127.0.0.2:8265", "[::1]:8265", ""} {
			if ans.ServerProof == ServerProof(serverToken, nonce, ans.Session, relay) {
				t.Errorf("%s: the proof verifies at %q too", name, relay)
			}
		}
	}
}

// A secret the server seals in its answer (a sign-in code) opens only with the key of
// the request that asked: its session's, or, for a request with the token itself, the
// token's.
func TestSealedToTheRequest(t *testing.T) {
	h := Middleware(serverToken, Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sealed, err := Seal(r.Context(), "the secret")
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, sealed)
	}))
	s, other := startSession(t, h), startSession(t, h)
	w := s.send(h, "POST", SignInPath, 1, nil)
	sealed := w.Body.String()
	if w.Code != 200 || strings.Contains(sealed, "the secret") {
		t.Fatalf("sealed answer: %d %q", w.Code, sealed)
	}
	if got, err := OpenSealed(s.key, sealed); err != nil || got != "the secret" {
		t.Errorf("opened with the session's key: %q, %v", got, err)
	}
	for name, key := range map[string][]byte{"another session's key": other.key, "the token's key": BearerKey(serverToken)} {
		if got, err := OpenSealed(key, sealed); err == nil {
			t.Errorf("opened with %s: %q", name, got)
		}
	}
	r := localRequest("POST", SignInPath, nil)
	r.Header.Set("Authorization", "Bearer "+serverToken)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if got, err := OpenSealed(BearerKey(serverToken), w.Body.String()); w.Code != 200 || err != nil || got != "the secret" {
		t.Errorf("sealed to a Bearer request: %d, opened %q, %v", w.Code, got, err)
	}
	if _, err := Seal(context.Background(), "x"); err == nil {
		t.Error("sealed to a request that passed no check")
	}
}

// Session IDs are valid only at the process that issued them, for SessionLifetime; a
// full table forgets the oldest session without letting its requests be replayed.
func TestProofSessions(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	h := Middleware(serverToken, Options{Now: clock}, reading())
	other := Middleware(serverToken, Options{Now: clock}, reading())
	s := startSession(t, h)
	if got := s.signed(other, "GET", "/api/v1/jobs", 1, nil); got != http.StatusUnauthorized {
		t.Errorf("another process's session: %d, want 401", got)
	}
	if got := s.signed(h, "GET", "/api/v1/jobs", 1, nil); got != 200 {
		t.Errorf("own session: %d", got)
	}
	now = now.Add(SessionLifetime + time.Second)
	if got := s.signed(h, "GET", "/api/v1/jobs", 2, nil); got != http.StatusUnauthorized {
		t.Errorf("an expired session: %d, want 401", got)
	}

	p := newProver(serverToken, clock)
	p.max = 2
	for i, id := range []string{"a", "b", "c"} {
		if err := p.remember(id, now.Add(time.Duration(i)*time.Second), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := p.live["a"]; ok {
		t.Error("the oldest session was kept in a full table")
	}
	if err := p.remember("a", now, 2); err == nil {
		t.Error("a forgotten session was accepted again")
	}
	if err := p.remember("c", now.Add(2*time.Second), 1); err == nil {
		t.Error("a replay in a live session was accepted")
	}
}

// A signed body must be the one signed, however long; a request without a body hash may
// have no body.
func TestProofBody(t *testing.T) {
	h := Middleware(serverToken, Options{}, reading())
	s := startSession(t, h)
	long := bytes.Repeat([]byte("x"), eagerBody+10)
	if got := s.signed(h, "PUT", "/api/packages/gcs/p.zip", 1, long); got != 200 {
		t.Errorf("a long body: %d", got)
	}
	if got := s.signed(h, "POST", "/api/v1/jobs", 2, []byte(`{}`)); got != 200 {
		t.Errorf("a short body: %d", got)
	}
	r := localRequest("POST", "/api/v1/jobs/x/stop", strings.NewReader("added"))
	r.Header.Set("Authorization", Proof{Session: s.id, Nonce: s.nonce, Seq: 3,
		Sig: Sign(s.key, "POST", r.RequestURI, 3, "")}.Header())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "body its proof does not cover") {
		t.Errorf("a body without a hash: %d %s", w.Code, w.Body)
	}
}

// Malformed proofs and challenges are refused with a message.
func TestProofMalformed(t *testing.T) {
	h := Middleware(serverToken, Options{}, reading())
	cases := map[string]struct {
		header string
		want   int
	}{
		"no fields":      {ProofScheme + " ", http.StatusForbidden},
		"seq zero":       {ProofScheme + " session=a, nonce=b, seq=0, body=, sig=c", http.StatusForbidden},
		"repeated field": {ProofScheme + " session=a, session=b, nonce=b, seq=1, body=, sig=c", http.StatusForbidden},
		"unknown id":     {ProofScheme + " session=a, nonce=b, seq=1, body=, sig=c", http.StatusUnauthorized},
	}
	for name, tc := range cases {
		r := localRequest("GET", "/api/v1/jobs", nil)
		r.Header.Set("Authorization", tc.header)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", name, w.Code, w.Body, tc.want)
		}
	}
	for _, body := range []string{"", "{}", `{"clientNonce": "short"}`, "not json"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, localRequest("POST", ChallengePath, strings.NewReader(body)))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "clientNonce") {
			t.Errorf("challenge %q: %d %s", body, w.Code, w.Body)
		}
	}
}

// localRequest is httptest.NewRequest addressed to localhost, which the Host check allows.
func localRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = "localhost:8265"
	return r
}
