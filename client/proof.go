package client

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/internal/auth"
)

// session is a proof session with the server (see internal/auth, "Proofs instead of the
// token"): the server proved that it holds the token, and each request is signed with a
// key derived from the token that never travels.
type session struct {
	id    string
	nonce string
	key   []byte
	seq   atomic.Uint64
}

// sessions keeps a client's current session, started at its first request.
type sessions struct {
	mu  sync.Mutex
	cur *session
}

// ErrNotTheServer is wrapped by the error of a client whose server could not prove that it
// holds the token: whatever answers at the address is not the trainyard server the token
// belongs to. The client sent it nothing that grants access.
var ErrNotTheServer = errors.New("not the trainyard server of this token")

// authorize sets the Authorization header of req, whose body is body (nil: none): the
// token itself for a client WithBearer, else a proof in the current session, which it
// starts first when there is none. It returns the key the server seals secrets in its
// answer with (auth.Seal): the session's, or auth.BearerKey; nil without a token.
func (c *Client) authorize(ctx context.Context, h http.Header, method, requestURI string, body []byte) ([]byte, error) {
	if c.token == "" {
		return nil, nil
	}
	if c.bearer {
		h.Set("Authorization", "Bearer "+c.token)
		return auth.BearerKey(c.token), nil
	}
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	seq := s.seq.Add(1)
	hash := auth.BodyHash(body)
	h.Set("Authorization", auth.Proof{Session: s.id, Nonce: s.nonce, Seq: seq, Body: hash,
		Sig: auth.Sign(s.key, method, requestURI, seq, hash)}.Header())
	return s.key, nil
}

// session returns the current session, starting one when there is none.
func (c *Client) session(ctx context.Context) (*session, error) {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.cur != nil {
		return c.sess.cur, nil
	}
	s, err := c.challenge(ctx)
	if err != nil {
		return nil, err
	}
	c.sess.cur = s
	return s, nil
}

// dropSession forgets s, so that the next request starts a new session.
func (c *Client) dropSession(s string) {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.cur != nil && c.sess.cur.id == s {
		c.sess.cur = nil
	}
}

// stale reports whether resp asks for a new session.
func stale(resp *http.Response) bool {
	if resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	for _, v := range resp.Header.Values("WWW-Authenticate") {
		if strings.HasPrefix(v, auth.ProofScheme) && strings.Contains(v, `error="stale"`) {
			return true
		}
	}
	return false
}

// sessionOf returns the session ID a request's proof names, "" for none.
func sessionOf(h http.Header) string {
	v := h.Get("Authorization")
	_, rest, ok := strings.Cut(v, "session=")
	if !ok || !strings.HasPrefix(v, auth.ProofScheme) {
		return ""
	}
	id, _, _ := strings.Cut(rest, ",")
	return id
}

// challenge starts a session: it sends a fresh nonce and checks that the answer proves
// the token for the address its connection reached, so that a relay at another address
// cannot pass the server's proof off as its own. Nothing it sends grants anything to
// whoever answers.
func (c *Client) challenge(ctx context.Context) (*session, error) {
	nonce := auth.NewNonce()
	data, _ := json.Marshal(auth.ChallengeRequest{ClientNonce: nonce})
	u := *c.base
	u.Path = auth.ChallengePath
	var reached atomic.Value // the address the connection reached, as auth.ConnAddr writes it
	reached.Store("")
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		reached.Store(auth.ConnAddr(info.Conn.RemoteAddr()))
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, u.String(), bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	var ans auth.ChallengeAnswer
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Session == "" {
		return nil, c.impostor(resp)
	}
	addr := reached.Load().(string)
	if !hmac.Equal([]byte(ans.ServerProof), []byte(auth.ServerProof(c.token, nonce, ans.Session, addr))) {
		if ans.Address != addr && hmac.Equal([]byte(ans.ServerProof), []byte(auth.ServerProof(c.token, nonce, ans.Session, ans.Address))) {
			return nil, c.relayed(addr, ans.Address)
		}
		return nil, c.impostor(resp)
	}
	return &session{id: ans.Session, nonce: nonce, key: auth.SessionKey(c.token, nonce, ans.Session)}, nil
}

// impostor is the error of a server that did not prove it holds the token.
func (c *Client) impostor(resp *http.Response) error {
	return fmt.Errorf("%w: what answers at %s (%s) could not prove that it holds your token, so it is not the "+
		"trainyard server that token belongs to (a server with another token, or another program, perhaps another "+
		"user's, listening on that port); nothing that grants access was sent to it: start the server, or check "+
		"the address and the token", ErrNotTheServer, c.base, resp.Status)
}

// relayed is the error of a server that proved it holds the token, but for the address
// server, where its connection arrived, not for reached, where the client's went:
// something in between passes connections on, and could read every answer.
func (c *Client) relayed(reached, server string) error {
	return fmt.Errorf("%w: the trainyard server's proof is for %s, where the connection arrived, but this client "+
		"reached %s (%s): something in between passes the connection on (a program, perhaps another user's, on a "+
		"port listed for this token; a port forward to another port; an HTTP proxy of $HTTP_PROXY) and could read "+
		"every answer; nothing that grants access was sent: give the server's own address (--address), forward the "+
		"same address and port (ssh -L 8265:127.0.0.1:8265), or add the server to $NO_PROXY", ErrNotTheServer, server, reached, c.base)
}

// SignInLink asks the server for a one-time link that signs a browser in to its dashboard
// (it works once, for auth.SignInTTL) and returns its URL and when it expires. Like every
// request of the client, it goes only to a server that proved it holds the token, for the
// address the client reached; the code comes sealed to the request (auth.Seal), so that
// only this client can open it.
func (c *Client) SignInLink(ctx context.Context) (string, time.Time, error) {
	resp, key, err := c.send(ctx, request{method: http.MethodPost, path: auth.SignInPath, want: http.StatusCreated})
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", time.Time{}, c.refusal(resp)
	}
	var ans auth.SealedSignIn
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&ans); err != nil {
		return "", time.Time{}, fmt.Errorf("POST %s: decode the answer: %w", auth.SignInPath, err)
	}
	if ans.Path != auth.LoginPath {
		return "", time.Time{}, fmt.Errorf("the server answered a sign-in page %q that is not its own", ans.Path)
	}
	code, err := auth.OpenSealed(key, ans.SealedCode)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("open the sign-in code: %w", err)
	}
	if _, err := base64.RawURLEncoding.DecodeString(code); err != nil || code == "" {
		return "", time.Time{}, errors.New("the server sealed a sign-in code that is not one (unpadded base64url)")
	}
	return c.base.String() + ans.Path + "#code=" + code, ans.Expires, nil
}
