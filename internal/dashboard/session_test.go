package dashboard

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/auth"
)

// A session is a random ID the dashboard remembers: valid until it expires or is ended,
// worthless to another dashboard, and never derived from the token.
func TestSessions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	s := newSessions(CookieName("8265"), []byte("secret-token"), clock)
	id := s.issue()
	if strings.Contains(id, "secret-token") {
		t.Fatalf("the session holds the token: %q", id)
	}
	req := func(name, v string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: name, Value: v})
		return r
	}
	if _, ok := s.valid(req("trainyard_session_8265", id)); !ok {
		t.Error("a fresh session is refused")
	}
	other := newSessions(CookieName("8265"), []byte("secret-token"), clock) // another server, same token
	cases := map[string]*http.Request{
		"another dashboard's session":                req("trainyard_session_8265", other.issue()),
		"the session under the name of another port": req("trainyard_session_8266", id),
		"a made-up session":                          req("trainyard_session_8265", "AAAA"),
		"empty":                                      req("trainyard_session_8265", ""),
	}
	for name, r := range cases {
		if _, ok := s.valid(r); ok {
			t.Errorf("%s accepted", name)
		}
	}
	s.end(id)
	if _, ok := s.valid(req("trainyard_session_8265", id)); ok {
		t.Error("an ended session is accepted")
	}
	id = s.issue()
	now = now.Add(SessionLifetime)
	if _, ok := s.valid(req("trainyard_session_8265", id)); ok {
		t.Error("an expired session is accepted")
	}
	if !s.validToken("secret-token") || s.validToken("secret-toke") || s.validToken("") {
		t.Error("validToken is wrong")
	}
}

// A state-changing request needs its session's CSRF token and, when it says where it
// comes from, this site as its origin.
func TestCSRF(t *testing.T) {
	s := newSessions(CookiePrefix, nil, time.Now)
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
		"/\\evil": "/", "jobs": "/", "/\t/evil.example/": "/", "/\n/evil.example": "/", "/\r//evil": "/",
		"/%09/evil.example/": "/%09/evil.example/", "/\x7f/x": "/", "/jobs/x%2F..%2Fmachine": "/jobs/x%2F..%2Fmachine",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// emptyBackend is a backend without jobs.
type emptyBackend struct{ Backend }

func (emptyBackend) ListPage(context.Context, client.ListOptions) (client.JobList, error) {
	return client.JobList{}, nil
}

func (emptyBackend) Stop(context.Context, string) (client.Job, error) {
	panic("a read-only dashboard stopped a job")
}

// signInForm posts the sign-in form and returns the answer.
func signInForm(h http.Handler, form url.Values, tlsConn bool) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8265/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "127.0.0.1:5555"
	if tlsConn {
		r.TLS = &tls.ConnectionState{}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A sign-in link's code signs in once; the token signs in over TLS only; repeated
// failures are slowed down and logged once per client and minute; signing out ends the
// session.
func TestSignIn(t *testing.T) {
	var logs bytes.Buffer
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	signIns := auth.NewSignIns(clock)
	h, err := New(Config{Backend: emptyBackend{}, Token: "secret-token-secret-token-secret-token", SignIns: signIns,
		CookieName: CookieName("8265"), Now: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	code, _ := signIns.Issue()
	w := signInForm(h, url.Values{"code": {code}, "next": {"/\t/evil.example/"}}, false)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("sign in with a code: %d to %q, want 303 to /", w.Code, w.Header().Get("Location"))
	}
	cookie := w.Result().Cookies()[0]
	if cookie.Name != "trainyard_session_8265" || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v", cookie)
	}
	if w := signInForm(h, url.Values{"code": {code}}, false); w.Code != http.StatusForbidden ||
		!strings.Contains(w.Body.String(), "used already or has expired") {
		t.Errorf("a used code: %d %s", w.Code, w.Body)
	}
	if w := signInForm(h, url.Values{"token": {"secret-token-secret-token-secret-token"}}, false); w.Code != http.StatusForbidden ||
		!strings.Contains(w.Body.String(), "does not take the token over plain HTTP") {
		t.Errorf("the token over plain HTTP: %d", w.Code)
	}
	for i := 0; i < 3; i++ {
		signInForm(h, url.Values{"token": {"wrong"}}, true)
	}
	if w := signInForm(h, url.Values{"token": {"secret-token-secret-token-secret-token"}}, true); w.Code != http.StatusTooManyRequests ||
		w.Header().Get("Retry-After") != "60" {
		t.Errorf("after 5 failures: %d, Retry-After %q; want 429, 60", w.Code, w.Header().Get("Retry-After"))
	}
	now = now.Add(failWindow)
	if w := signInForm(h, url.Values{"token": {"secret-token-secret-token-secret-token"}}, true); w.Code != http.StatusSeeOther {
		t.Errorf("the token over TLS, a minute later: %d", w.Code)
	}
	signInForm(h, url.Values{"token": {"wrong"}}, true) // a new window: the old one is summed up
	if n := strings.Count(logs.String(), "a failed sign-in"); n != 2 {
		t.Errorf("%d lines for single failures, want one per window:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `failed sign-ins" client=127.0.0.1 count=5`) {
		t.Errorf("no summary of the window's failures:\n%s", logs.String())
	}

	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8265/logout", nil)
	r.AddCookie(cookie)
	r.Header.Set("X-CSRF-Token", h.sessions.csrf(cookie.Value))
	h.ServeHTTP(httptest.NewRecorder(), r)
	r = httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8265/", nil)
	r.AddCookie(cookie)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/login") {
		t.Errorf("the signed-out session's cookie still opens the list: %d", w.Code)
	}
}

// Failed sign-ins from one address (another local user's, all from 127.0.0.1) never stop
// a right code from it: a code is checked first, and is 256 random bits that no number
// of tries guesses. Guesses of the token are still slowed down.
func TestSignInCodeNotLockedOut(t *testing.T) {
	signIns := auth.NewSignIns(nil)
	token := "secret-token-secret-token-secret-token"
	h, err := New(Config{Backend: emptyBackend{}, Token: token, SignIns: signIns, CookieName: CookieName("8265"),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*failFree; i++ {
		signInForm(h, url.Values{"code": {"made-up"}}, false)
		signInForm(h, url.Values{"token": {"wrong"}}, true)
	}
	if w := signInForm(h, url.Values{"code": {"made-up"}}, false); w.Code != http.StatusTooManyRequests {
		t.Errorf("a wrong code after %d failures: %d, want 429", 4*failFree, w.Code)
	}
	code, _ := signIns.Issue()
	if w := signInForm(h, url.Values{"code": {code}}, false); w.Code != http.StatusSeeOther {
		t.Errorf("a right code after %d failures from its address: %d %s, want 303", 4*failFree, w.Code, w.Body)
	}
	if w := signInForm(h, url.Values{"token": {token}}, true); w.Code != http.StatusTooManyRequests {
		t.Errorf("the token after %d failures: %d, want 429", 4*failFree, w.Code)
	}
}

// A read-only dashboard answers Stop and Delete with 405, and logs are never cached.
func TestReadOnlyAndNoStore(t *testing.T) {
	h, err := New(Config{Backend: logBackend{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	id := h.sessions.issue()
	for _, path := range []string{"/jobs/a/stop", "/jobs/a/delete"} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8266"+path, nil)
		r.AddCookie(&http.Cookie{Name: CookiePrefix, Value: id})
		r.Header.Set("X-CSRF-Token", h.sessions.csrf(id))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d, Allow %q; want 405", path, w.Code, w.Header().Get("Allow"))
		}
	}
	for _, q := range []string{"", "?download=1"} {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8266/jobs/a/log"+q, nil)
		r.AddCookie(&http.Cookie{Name: CookiePrefix, Value: id})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Header().Get("Cache-Control"); w.Code != 200 || got != "no-store" {
			t.Errorf("GET log%s: %d, Cache-Control %q; want no-store", q, w.Code, got)
		}
	}
}

// logBackend has one job whose log is a line.
type logBackend struct{ Backend }

func (logBackend) Logs(context.Context, string, client.LogOptions) (string, error) {
	return "a line\n", nil
}
func (logBackend) Get(context.Context, string) (client.JobDetail, error) {
	return client.JobDetail{}, nil
}
func (logBackend) WriteLog(_ context.Context, _ string, _ client.LogOptions, w io.Writer) error {
	_, err := io.WriteString(w, "a line\n")
	return err
}

// listBackend lists one job whose ID would leave /jobs/ unescaped.
type listBackend struct{ Backend }

const oddID = "x/../../machine?spoof,#a b"

func (listBackend) ListPage(context.Context, client.ListOptions) (client.JobList, error) {
	return client.JobList{Jobs: []client.Job{{ID: oddID, Status: client.StatusSucceeded}}}, nil
}

// A job's ID goes into links as one escaped path segment, whatever it holds.
func TestJobIDsEscapedInLinks(t *testing.T) {
	h, err := New(Config{Backend: listBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	id := h.sessions.issue()
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8265/", nil)
	r.AddCookie(&http.Cookie{Name: CookiePrefix, Value: id})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	want := `href="/jobs/` + url.PathEscape(oddID) + `"`
	if w.Code != 200 || !strings.Contains(w.Body.String(), want) {
		t.Errorf("the job list has no link %s:\n%s", want, w.Body)
	}
	if strings.Contains(w.Body.String(), `href="/jobs/x/`) {
		t.Error("a link leaves the job's path")
	}
}
