package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// SignInPath is the native API's endpoint that makes a one-time sign-in link to the
// dashboard: POST, with the token's proof, answered with a SealedSignIn.
const SignInPath = "/api/v1/signin-links"

// LoginPath is the dashboard's sign-in page; a link adds "#code=" and the code.
const LoginPath = "/login"

// SignInTTL is how long a sign-in code may be used, once.
const SignInTTL = 2 * time.Minute

// maxCodes bounds the codes waiting to be used; the oldest goes first.
const maxCodes = 64

// SealedSignIn is the answer of POST SignInPath: a sign-in code sealed (Seal) to the
// request that asked for it, so that only the client that signed that request can open
// it; a relay that sees the answer cannot use it. The client opens it with OpenSealed and
// makes the link: Path + "#code=" + the code.
type SealedSignIn struct {
	// Path is the dashboard's sign-in page, LoginPath.
	Path string `json:"path"`
	// SealedCode is the code, sealed to the request.
	SealedCode string `json:"sealedCode"`
	// Expires is when the code stops working.
	Expires time.Time `json:"expires"`
}

// SignInLink is a sign-in link made where nobody else sees it (trainyard dashboard prints
// it in its terminal).
type SignInLink struct {
	// Path is the link's path on the server, with the code in its fragment, which the
	// browser keeps to itself: "/login#code=...".
	Path string `json:"path"`
	// Expires is when the code stops working.
	Expires time.Time `json:"expires"`
}

// SignIns are one-time codes that sign a browser in to the dashboard: a client that
// proved it holds the token gets one (the server's API), and the dashboard takes it once
// in place of the token, so that a browser never needs the token and no page ever asks
// for it where another program could stand in for the server. Codes are random, kept
// hashed, valid for SignInTTL and once; at most 64 wait at a time. Its methods are safe
// for concurrent use.
type SignIns struct {
	mu    sync.Mutex
	now   func() time.Time
	codes map[[sha256.Size]byte]time.Time // expiry by hash of the code
}

// NewSignIns returns an empty set of codes on the clock now (nil: time.Now).
func NewSignIns(now func() time.Time) *SignIns {
	if now == nil {
		now = time.Now
	}
	return &SignIns{now: now, codes: map[[sha256.Size]byte]time.Time{}}
}

// Issue returns a new code and when it expires.
func (s *SignIns) Issue() (code string, expires time.Time) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	code = base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for h, exp := range s.codes {
		if !now.Before(exp) {
			delete(s.codes, h)
		}
	}
	for len(s.codes) >= maxCodes {
		var oldest [sha256.Size]byte
		first := true
		for h, exp := range s.codes {
			if first || exp.Before(s.codes[oldest]) {
				oldest, first = h, false
			}
		}
		delete(s.codes, oldest)
	}
	expires = now.Add(SignInTTL)
	s.codes[sha256.Sum256([]byte(code))] = expires
	return code, expires
}

// Link returns the sign-in link of a new code.
func (s *SignIns) Link() SignInLink {
	code, exp := s.Issue()
	return SignInLink{Path: LoginPath + "#code=" + code, Expires: exp.UTC()}
}

// Redeem reports whether code is a code issued and not yet used nor expired, and uses it.
func (s *SignIns) Redeem(code string) bool {
	h := sha256.Sum256([]byte(code))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.codes[h]
	delete(s.codes, h)
	return ok && s.now().Before(exp)
}
