package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxSessions bounds the sessions a server remembers; see prover.remember.
const maxSessions = 4096

// replayWindow is how many requests of a session may arrive out of order.
const replayWindow = 1024

// maxSeqJump is how far above the highest number a session used so far a request's number
// may be. A number further ahead (2^64-1, say) is refused as stale rather than let move
// the window past every number the client will still use.
const maxSeqJump = 1 << 16

// eagerBody is how much of a signed body the middleware reads before passing the request
// on; a longer one (a package upload) is checked when its reader reaches the end.
const eagerBody = 1 << 20

// prover answers challenges and checks signed requests for one server process.
type prover struct {
	token string
	idKey []byte // this process's own: IDs it issued are valid here only
	now   func() time.Time
	max   int
	mu    sync.Mutex
	live  map[string]*window // sessions that have signed at least one request
	floor time.Time          // sessions issued at or before it, and not live, are refused
}

func newProver(token string, now func() time.Time) *prover {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &prover{token: token, idKey: key, now: now, max: maxSessions, live: map[string]*window{}}
}

// window is the requests of a session seen so far: the highest number, and which of the
// replayWindow numbers below it.
type window struct {
	issued time.Time
	top    uint64
	seen   [replayWindow / 64]uint64
}

// use marks seq used; false when it was, or is too old to tell. The caller has checked
// that seq is at most maxSeqJump above top.
func (w *window) use(seq uint64) bool {
	switch {
	case seq > w.top:
		for i := uint64(1); i <= min(seq-w.top, replayWindow); i++ {
			w.clear(w.top + i)
		}
		w.top = seq
	case w.top-seq >= replayWindow:
		return false
	}
	word, bit := (seq%replayWindow)/64, seq%64
	if w.seen[word]&(1<<bit) != 0 {
		return false
	}
	w.seen[word] |= 1 << bit
	return true
}

func (w *window) clear(seq uint64) {
	word, bit := (seq%replayWindow)/64, seq%64
	w.seen[word] &^= 1 << bit
}

// challenge answers POST ChallengePath.
func (p *prover) challenge(w http.ResponseWriter, r *http.Request) {
	var req ChallengeRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if n, derr := base64.RawURLEncoding.DecodeString(req.ClientNonce); err != nil || derr != nil || len(n) != NonceBytes {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`send {"clientNonce": "<%d random bytes, unpadded base64url>"}`, NonceBytes))
		return
	}
	now := p.now()
	id := issueID(p.idKey, now)
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	addr := ConnAddr(local)
	ans := ChallengeAnswer{Session: id, ServerProof: ServerProof(p.token, req.ClientNonce, id, addr), Address: addr,
		Expires: now.Add(SessionLifetime).UTC()}
	data, _ := json.Marshal(ans)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(append(data, '\n'))
}

// staleError is a refusal the client answers by starting a new session.
type staleError struct{ msg string }

func (e *staleError) Error() string { return e.msg }

// verify checks a request signed in a session and, when it has a body, arranges for the
// body to be checked against its hash: at once for a short one, at its end otherwise. It
// returns the session's key, which seals secrets in the answer (Seal).
func (p *prover) verify(r *http.Request, pr Proof) ([]byte, error) {
	id, ok := checkID(p.idKey, pr.Session)
	if !ok {
		return nil, &staleError{"unknown session (the server restarted, or it is another server's): start a new one"}
	}
	if age := p.now().Sub(id.issued); age > SessionLifetime || age < -time.Minute {
		return nil, &staleError{"the session expired: start a new one"}
	}
	key := SessionKey(p.token, pr.Nonce, pr.Session)
	want := Sign(key, r.Method, r.RequestURI, pr.Seq, pr.Body)
	if !hmac.Equal([]byte(want), []byte(pr.Sig)) {
		return nil, errors.New("the request's proof does not match it: it was changed on the way, or signed with another token")
	}
	if err := p.checkBody(r, pr.Body); err != nil {
		return nil, err
	}
	return key, p.remember(pr.Session, id.issued, pr.Seq)
}

// remember records seq as used in the session. When the table is full it forgets the
// session issued first and refuses, from then on, every session issued no later that it
// does not remember, so that forgetting never lets a request be replayed.
func (p *prover) remember(session string, issued time.Time, seq uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.live[session]
	if w == nil {
		if !issued.After(p.floor) {
			return &staleError{"the server forgot this session: start a new one"}
		}
		p.makeRoom()
		w = &window{issued: issued}
		p.live[session] = w
	}
	if seq > w.top && seq-w.top > maxSeqJump {
		return &staleError{fmt.Sprintf("the request's number %d is more than %d above the session's highest, %d: start a new session",
			seq, maxSeqJump, w.top)}
	}
	if !w.use(seq) {
		return errors.New("this request was already received (a replay): each signed request is accepted once")
	}
	return nil
}

// makeRoom drops expired sessions and, while the table is full, the oldest.
func (p *prover) makeRoom() {
	if len(p.live) < p.max {
		return
	}
	cutoff := p.now().Add(-SessionLifetime)
	for id, w := range p.live {
		if w.issued.Before(cutoff) {
			p.forget(id, w)
		}
	}
	for len(p.live) >= p.max {
		var oldest string
		for id, w := range p.live {
			if oldest == "" || w.issued.Before(p.live[oldest].issued) {
				oldest = id
			}
		}
		p.forget(oldest, p.live[oldest])
	}
}

func (p *prover) forget(id string, w *window) {
	if w.issued.After(p.floor) {
		p.floor = w.issued
	}
	delete(p.live, id)
}

// ErrBodyMismatch is the error of a signed body that is not the one signed: a reader of a
// long one returns it at its end. A server answers it with 403.
var ErrBodyMismatch = errors.New("the request body does not match its proof: it was changed on the way")

// checkBody checks r's body against the hash of its proof: a request without one must
// have no body. Up to eagerBody bytes are read and checked now; a longer body is checked
// as it is read, and its reader returns ErrBodyMismatch instead of its end when it
// differs, so that a handler that reads to the end (and acts only then) never acts on it.
func (p *prover) checkBody(r *http.Request, want string) error {
	if want == "" {
		if r.ContentLength != 0 {
			return errors.New("the request has a body its proof does not cover")
		}
		return nil
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	h := sha256.New()
	head, err := io.ReadAll(io.LimitReader(io.TeeReader(r.Body, h), eagerBody+1))
	if err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	if len(head) <= eagerBody {
		if hex.EncodeToString(h.Sum(nil)) != want {
			return ErrBodyMismatch
		}
		r.Body = io.NopCloser(bytes.NewReader(head))
		return nil
	}
	r.Body = &checkedBody{r: io.MultiReader(bytes.NewReader(head), io.TeeReader(r.Body, h)), c: r.Body, h: h, want: want}
	return nil
}

// checkedBody passes a body through, hashing it, and fails at its end when the hash is not
// the one wanted.
type checkedBody struct {
	r    io.Reader
	c    io.Closer
	h    hash.Hash
	want string
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && hex.EncodeToString(b.h.Sum(nil)) != b.want {
		return n, ErrBodyMismatch
	}
	return n, err
}

func (b *checkedBody) Close() error { return b.c.Close() }
