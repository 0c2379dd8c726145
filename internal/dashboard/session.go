package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// CookieName is the session cookie's name.
const CookieName = "trainyard_session"

// SessionLifetime is how long a sign-in lasts.
const SessionLifetime = 12 * time.Hour

// sessions issues and checks session cookies and CSRF tokens: MACs under the server's
// token, so that nothing is stored and a new token signs everyone out.
type sessions struct {
	key []byte
	now func() time.Time
}

func (s sessions) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// validToken reports whether tok is the server's token, in constant time.
func (s sessions) validToken(tok string) bool {
	a, b := sha256.Sum256([]byte(tok)), sha256.Sum256(s.key)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// issue returns a new session value: "<unix time>.<MAC>".
func (s sessions) issue() string {
	ts := strconv.FormatInt(s.now().Unix(), 10)
	return ts + "." + s.mac("session", ts)
}

// valid reports whether the request carries a session cookie issued by us and not
// expired, and returns its value.
func (s sessions) valid(r *http.Request) (string, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return "", false
	}
	ts, sum, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(sum), []byte(s.mac("session", ts))) {
		return "", false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", false
	}
	age := s.now().Sub(time.Unix(sec, 0))
	return c.Value, age >= -time.Minute && age < SessionLifetime
}

// csrf returns the CSRF token of a session.
func (s sessions) csrf(session string) string { return s.mac("csrf", session) }

// checkCSRF reports whether a state-changing request carries its session's CSRF token
// (form field "csrf" or header X-CSRF-Token) and, when it says where it comes from, comes
// from the page's own origin.
func (s sessions) checkCSRF(r *http.Request, session string) bool {
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && hmac.Equal([]byte(got), []byte(s.csrf(session)))
}

// sameOrigin reports whether the request's Origin (or, without one, Referer), if any,
// names the host the request was sent to.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return true // not a browser's cross-site request: those send Origin
	}
	u, err := url.Parse(from)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// setCookie sets (or, with an empty value, clears) the session cookie.
func setCookie(w http.ResponseWriter, r *http.Request, value string) {
	c := &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(SessionLifetime.Seconds())}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}
