package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// HealthPath is the server's health check, the one path it exempts from the token.
const HealthPath = "/healthz"

// Header names that carry the token.
const (
	// HeaderAuthorization is the standard header: "Authorization: Bearer <token>".
	HeaderAuthorization = "Authorization"
	// HeaderRayAuthorization is the header Ray's clients send when a proxy in front of the
	// server uses Authorization for itself: "X-Ray-Authorization: Bearer <token>".
	HeaderRayAuthorization = "X-Ray-Authorization"
)

// Options adjusts Middleware. The zero value allows only the loopback names as Host and
// exempts no path.
type Options struct {
	// ListenAddr is the address the server listens on, "host:port". Its host is allowed as
	// Host; an empty host, 0.0.0.0 or :: (all interfaces) allows any IP address as Host.
	ListenAddr string
	// AllowHosts are more names or IP addresses that requests may name in Host
	// (--allow-host), with or without a port, which is ignored. "*" allows any Host and
	// turns the DNS-rebinding defence off; the token is still required. Entries that are
	// not a host name or IP address (such as a URL) allow nothing; the server should check
	// its flags itself to report them.
	AllowHosts []string
	// ExemptPaths are URL paths that GET and HEAD requests may fetch without a token,
	// matched exactly (no prefixes, "/healthz/" is not "/healthz"). Their handlers must
	// reveal nothing about jobs. Other methods on these paths still need the token.
	ExemptPaths []string
	// OnRefuse, when set, is called for every request Middleware refuses, with the status
	// (401 or 403) and the reason it answers; the server logs it for its audit trail. The
	// reason never holds the token.
	OnRefuse func(r *http.Request, status int, reason string)
	// RayPath, when set, reports the URL paths of Ray's API: their refusals are written as
	// Ray's dashboard writes its token middleware's, text/plain with Ray's own words
	// (RayMissingToken, RayInvalidToken), so that Ray's clients (KubeRay's among them, which
	// decodes any JSON body as a job) see the refusal. OnRefuse still gets the full reason.
	RayPath func(path string) bool
	// Now is the clock of sessions (see ChallengePath); nil is time.Now.
	Now func() time.Time
}

// Ray's refusals, as Ray's token middleware answers them
// (python/ray/_private/authentication/http_token_authentication.py).
const (
	// RayErrorContentType is the Content-Type of Ray's errors: aiohttp's for text.
	RayErrorContentType = "text/plain; charset=utf-8"
	// RayMissingToken is the body of Ray's 401.
	RayMissingToken = "Unauthorized: Missing authentication token"
	// RayInvalidToken is the body of Ray's 403 for a wrong token.
	RayInvalidToken = "Forbidden: Invalid authentication token"
)

// errorBody is the JSON body of a refusal.
type errorBody struct {
	Error string `json:"error"`
}

// tokenHint says how to send the token; it ends the message of a 401.
const tokenHint = `send the header "Authorization: Bearer <token>" ` +
	`(Ray clients: RAY_AUTH_MODE=token with RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH); ` +
	`the token is in the server's token file, by default ~/.config/trainyard/token or $` + EnvTokenFile

// Middleware returns a handler that passes to next only requests that name an allowed
// Host and carry token (or ask for an exempt path with GET or HEAD). It refuses the others
// with a JSON error (with Ray's text on Ray's paths, see Options.RayPath): 403 for a foreign Host, 401 for a missing token, 403 for a wrong one.
// The package comment tells the rules in full. It panics if token is empty, which would
// be a bug in the caller.
func Middleware(token string, opts Options, next http.Handler) http.Handler {
	if token == "" {
		panic("auth.Middleware: empty token")
	}
	hosts := newHostSet(opts)
	exempt := make(map[string]bool, len(opts.ExemptPaths))
	for _, p := range opts.ExemptPaths {
		exempt[p] = true
	}
	want := sha256.Sum256([]byte(token))
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	proofs := newProver(token, now)
	bearerKey := BearerKey(token)
	// refuse answers a refusal: msg as JSON, or rayText as Ray writes it on Ray's paths.
	refuse := func(w http.ResponseWriter, r *http.Request, status int, msg, rayText string) {
		if opts.OnRefuse != nil {
			opts.OnRefuse(r, status, msg)
		}
		if opts.RayPath != nil && opts.RayPath(r.URL.Path) {
			writeText(w, status, rayText)
			return
		}
		writeError(w, status, msg)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.allows(r.Host) {
			// Ray has no Host check to copy: on its paths, our words as Ray writes text.
			msg := hosts.refusal(r.Host)
			refuse(w, r, http.StatusForbidden, msg, "Forbidden: "+msg)
			return
		}
		if exempt[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == ChallengePath && r.Method == http.MethodPost {
			proofs.challenge(w, r)
			return
		}
		if key, handled, err := checkProof(r, proofs); handled {
			if err != nil {
				refuseProof(w, r, err, refuse)
				return
			}
			next.ServeHTTP(w, withRequestKey(r, key))
			return
		}
		if status, msg := checkToken(r, want); status != 0 {
			rayText := RayInvalidToken
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="trainyard"`)
				rayText = RayMissingToken
			}
			refuse(w, r, status, msg, rayText)
			return
		}
		next.ServeHTTP(w, withRequestKey(r, bearerKey))
	})
}

// checkProof checks a request signed in a session (ProofScheme) and returns the session's
// key; handled is false when its Authorization header is of another scheme.
func checkProof(r *http.Request, proofs *prover) (key []byte, handled bool, err error) {
	for _, v := range r.Header.Values(HeaderAuthorization) {
		p, ok, err := parseProof(v)
		if !ok {
			continue
		}
		if err != nil {
			return nil, true, err
		}
		key, err := proofs.verify(r, p)
		return key, true, err
	}
	return nil, false, nil
}

// refuseProof refuses a signed request: 401 asking for a new session when it was stale,
// 403 otherwise.
func refuseProof(w http.ResponseWriter, r *http.Request, err error, refuse func(http.ResponseWriter, *http.Request, int, string, string)) {
	if _, ok := errors.AsType[*staleError](err); ok {
		w.Header().Set("WWW-Authenticate", ProofScheme+` error="stale"`)
		refuse(w, r, http.StatusUnauthorized, err.Error(), RayMissingToken)
		return
	}
	refuse(w, r, http.StatusForbidden, err.Error(), RayInvalidToken)
}

// checkToken looks for a Bearer token in the request's headers and compares it with the
// SHA-256 of the server's token. It returns status 0 when one matches, else the status and
// message to refuse the request with.
func checkToken(r *http.Request, want [sha256.Size]byte) (int, string) {
	presented := false
	for _, name := range []string{HeaderAuthorization, HeaderRayAuthorization} {
		for _, v := range r.Header.Values(name) {
			tok, ok := bearerToken(v)
			if !ok {
				continue
			}
			presented = true
			got := sha256.Sum256([]byte(tok))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				return 0, ""
			}
		}
	}
	if presented {
		return http.StatusForbidden, "invalid token: it does not match the server's token; " +
			"use the one in the server's token file (by default ~/.config/trainyard/token or $" + EnvTokenFile + ")"
	}
	return http.StatusUnauthorized, missingTokenMessage(r)
}

// missingTokenMessage says why no token was found and how to send one.
func missingTokenMessage(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case q.Has("token") || q.Has("access_token"):
		return "missing token: tokens in the URL are not accepted, as URLs end up in logs; " + tokenHint
	case r.Header.Get(HeaderAuthorization) != "" || r.Header.Get(HeaderRayAuthorization) != "":
		return "missing token: the Authorization header does not hold a Bearer token; " + tokenHint
	}
	return "missing token: " + tokenHint
}

// bearerToken returns the token of an Authorization header value that uses the Bearer
// scheme (in any case), and false for any other value.
func bearerToken(v string) (string, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok := strings.TrimLeft(rest, " ")
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

// writeError sends a JSON error body with the given status.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, err := json.Marshal(errorBody{Error: msg})
	if err != nil {
		body = []byte(`{"error":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "%s\n", body)
}

// writeText sends a text/plain body, msg exactly, as Ray's dashboard writes its errors.
func writeText(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", RayErrorContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// HostCheck returns a handler that passes to next only requests that name an allowed
// Host (as Middleware checks it) and refuses the others with 403: the dashboard's pages,
// which check their session themselves, get the same defence against DNS rebinding.
func HostCheck(opts Options, next http.Handler) http.Handler {
	hosts := newHostSet(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.allows(r.Host) {
			msg := hosts.refusal(r.Host)
			if opts.OnRefuse != nil {
				opts.OnRefuse(r, http.StatusForbidden, msg)
			}
			writeText(w, http.StatusForbidden, "Forbidden: "+msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}
