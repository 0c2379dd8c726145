package client

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
// starts first when there is none.
func (c *Client) authorize(ctx context.Context, h http.Header, method, requestURI string, body []byte) error {
	if c.token == "" {
		return nil
	}
	if c.bearer {
		h.Set("Authorization", "Bearer "+c.token)
		return nil
	}
	s, err := c.session(ctx)
	if err != nil {
		return err
	}
	seq := s.seq.Add(1)
	hash := auth.BodyHash(body)
	h.Set("Authorization", auth.Proof{Session: s.id, Nonce: s.nonce, Seq: seq, Body: hash,
		Sig: auth.Sign(s.key, method, requestURI, seq, hash)}.Header())
	return nil
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
// the token. Nothing it sends grants anything to whoever answers.
func (c *Client) challenge(ctx context.Context) (*session, error) {
	nonce := auth.NewNonce()
	data, _ := json.Marshal(auth.ChallengeRequest{ClientNonce: nonce})
	u := *c.base
	u.Path = auth.ChallengePath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(data))
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
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Session == "" ||
		!hmac.Equal([]byte(ans.ServerProof), []byte(auth.ServerProof(c.token, nonce, ans.Session))) {
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

// SignInLink asks the server for a one-time link that signs a browser in to its dashboard
// (it works once, for auth.SignInTTL) and returns its URL and when it expires. Like every
// request of the client, it goes only to a server that proved it holds the token.
func (c *Client) SignInLink(ctx context.Context) (string, time.Time, error) {
	var link auth.SignInLink
	if err := c.do(ctx, request{method: http.MethodPost, path: auth.SignInPath, want: http.StatusCreated}, &link); err != nil {
		return "", time.Time{}, err
	}
	if !strings.HasPrefix(link.Path, "/login#") {
		return "", time.Time{}, fmt.Errorf("the server answered a sign-in link %q that is not its own", link.Path)
	}
	return c.base.String() + link.Path, link.Expires, nil
}
