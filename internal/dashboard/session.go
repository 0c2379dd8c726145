package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// CookiePrefix starts the session cookie's name; CookieName adds the port, so that each
// dashboard on a host has a cookie of its own (browsers send a host's cookies to every
// port of it, so one name would let signing in to one sign out of another).
const CookiePrefix = "trainyard_session"

// CookieName returns the session cookie's name of a dashboard that listens on port:
// "trainyard_session_8265"; without a port, CookiePrefix.
func CookieName(port string) string {
	if port == "" {
		return CookiePrefix
	}
	return CookiePrefix + "_" + port
}

// SessionLifetime is how long a sign-in lasts at most.
const SessionLifetime = 12 * time.Hour

// maxSessions bounds the sessions a dashboard remembers; the oldest goes first.
const maxSessions = 1024

// sessions keeps who is signed in: random session IDs that the dashboard remembers
// (hashed), so that signing out ends a session, and so does a restart of the server or a
// new token (which needs one); and the CSRF token of each, a MAC of its ID under a key
// of this process. A session ID is worth nothing to another server: nothing it holds is
// derived from the token.
type sessions struct {
	cookie  string
	now     func() time.Time
	csrfKey []byte
	token   []byte // the sign-in token, accepted over TLS only (see login)

	mu   sync.Mutex
	live map[[sha256.Size]byte]time.Time // issue time by hash of the ID
}

func newSessions(cookie string, token []byte, now func() time.Time) *sessions {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &sessions{cookie: cookie, now: now, csrfKey: key, token: token, live: map[[sha256.Size]byte]time.Time{}}
}

// validToken reports whether tok is the sign-in token, in constant time.
func (s *sessions) validToken(tok string) bool {
	a, b := sha256.Sum256([]byte(tok)), sha256.Sum256(s.token)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// issue starts a session and returns its ID.
func (s *sessions) issue() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for h, t := range s.live {
		if now.Sub(t) >= SessionLifetime {
			delete(s.live, h)
		}
	}
	for len(s.live) >= maxSessions {
		s.dropOldest()
	}
	s.live[sha256.Sum256([]byte(id))] = now
	return id
}

func (s *sessions) dropOldest() {
	var oldest [sha256.Size]byte
	first := true
	for h, t := range s.live {
		if first || t.Before(s.live[oldest]) {
			oldest, first = h, false
		}
	}
	delete(s.live, oldest)
}

// end ends the session id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, sha256.Sum256([]byte(id)))
}

// valid reports whether the request carries the ID of a live session, and returns it.
func (s *sessions) valid(r *http.Request) (string, bool) {
	c, err := r.Cookie(s.cookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.live[h]
	if !ok {
		return "", false
	}
	if age := s.now().Sub(t); age >= SessionLifetime || age < -time.Minute {
		delete(s.live, h)
		return "", false
	}
	return c.Value, true
}

// csrf returns the CSRF token of a session.
func (s *sessions) csrf(session string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("csrf\x00" + session))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether a state-changing request carries its session's CSRF token
// (form field "csrf" or header X-CSRF-Token) and, when it says where it comes from, comes
// from the page's own origin.
func (s *sessions) checkCSRF(r *http.Request, session string) bool {
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
func (s *sessions) setCookie(w http.ResponseWriter, r *http.Request, value string) {
	c := &http.Cookie{Name: s.cookie, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(SessionLifetime.Seconds())}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}
