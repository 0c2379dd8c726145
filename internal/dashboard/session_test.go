package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A session cookie is a MAC under the token: it is valid until it expires, and a
// tampered, foreign or expired one is not.
func TestSessions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := sessions{key: []byte("secret-token"), now: func() time.Time { return now }}
	value := s.issue()
	if strings.Contains(value, "secret-token") {
		t.Fatalf("the cookie holds the token: %q", value)
	}
	req := func(v string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: v})
		return r
	}
	if _, ok := s.valid(req(value)); !ok {
		t.Error("a fresh session is refused")
	}
	other := sessions{key: []byte("another-token"), now: s.now}
	cases := map[string]string{
		"another server's": other.issue(),
		"tampered time":    "1800000001" + value[strings.Index(value, "."):],
		"no MAC":           "1800000000",
		"empty":            "",
	}
	for name, v := range cases {
		if _, ok := s.valid(req(v)); ok {
			t.Errorf("%s session accepted: %q", name, v)
		}
	}
	now = now.Add(SessionLifetime)
	if _, ok := s.valid(req(value)); ok {
		t.Error("an expired session is accepted")
	}
	if !s.validToken("secret-token") || s.validToken("secret-toke") || s.validToken("") {
		t.Error("validToken is wrong")
	}
}

// A state-changing request needs its session's CSRF token and, when it says where it
// comes from, this site as its origin.
func TestCSRF(t *testing.T) {
	s := sessions{key: []byte("k"), now: time.Now}
	session := s.issue()
	token := s.csrf(session)
	post := func(form url.Values, origin string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8265/jobs/x/stop", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		return r
	}
	cases := []struct {
		name   string
		form   url.Values
		origin string
		want   bool
	}{
		{"right token", url.Values{"csrf": {token}}, "http://127.0.0.1:8265", true},
		{"no origin", url.Values{"csrf": {token}}, "", true},
		{"no token", url.Values{}, "http://127.0.0.1:8265", false},
		{"another session's token", url.Values{"csrf": {s.csrf(session + "x")}}, "", false},
		{"foreign origin", url.Values{"csrf": {token}}, "http://evil.example", false},
	}
	for _, c := range cases {
		if got := s.checkCSRF(post(c.form, c.origin), session); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/jobs/a?rank=1": "/jobs/a?rank=1", "": "/", "//evil.example/x": "/", "https://evil.example": "/",
		"/\\evil": "/", "jobs": "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
