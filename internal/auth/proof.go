package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The proof protocol: how the trainyard CLI reaches its server without ever sending the
// token (see the package comment, "Proofs instead of the token").
const (
	// ChallengePath is where a client starts a session: POST {"clientNonce": ...}, answered
	// with the session's ID and the server's proof that it holds the token. It needs no
	// token.
	ChallengePath = "/api/v1/auth/challenge"
	// ProofScheme is the Authorization scheme of a request signed in a session:
	// "Trainyard-Proof session=S, nonce=N, seq=Q, body=B, sig=G".
	ProofScheme = "Trainyard-Proof"
	// NonceBytes is how many random bytes a client nonce holds.
	NonceBytes = 32
	// SessionLifetime is how long a session's ID is accepted after the server issued it;
	// a client then starts a new session.
	SessionLifetime = time.Hour
)

// Labels of the HMACs, so that no value of one can stand for another.
const (
	labelServer  = "trainyard proof v1 server"
	labelSession = "trainyard proof v1 session"
	labelRequest = "trainyard proof v1 request"
	labelID      = "trainyard proof v1 id"
	labelBearer  = "trainyard proof v1 bearer"
	labelSeal    = "trainyard proof v1 seal"
)

// ChallengeRequest is the body of POST ChallengePath.
type ChallengeRequest struct {
	// ClientNonce is NonceBytes random bytes, unpadded base64url.
	ClientNonce string `json:"clientNonce"`
}

// ChallengeAnswer is the server's answer to a ChallengeRequest.
type ChallengeAnswer struct {
	// Session is the session's ID, issued by this server process.
	Session string `json:"session"`
	// ServerProof is ServerProof(token, clientNonce, session, Address): only a holder of
	// the token can compute it, and it verifies only at the address the server's
	// connection arrived at.
	ServerProof string `json:"serverProof"`
	// Address is where the challenge's connection arrived at the server, as ConnAddr
	// writes it. The client checks the proof against the address it reached, not this
	// one; a proof for another address tells it that something passed the connection on.
	Address string `json:"address"`
	// Expires is when the server stops accepting the session.
	Expires time.Time `json:"expires"`
}

// NewNonce returns NonceBytes random bytes as unpadded base64url.
func NewNonce() string {
	b := make([]byte, NonceBytes)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// mac returns the HMAC-SHA256 under key of the parts joined by NUL bytes.
func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// ServerProof is what the server answers a client's nonce with in session: proof that it
// holds token, bound to both and to addr, the address (ConnAddr) its connection arrived
// at. The client verifies it with the address its own connection reached: a relay on
// another address that passes the connection on cannot pass the proof off as its own.
func ServerProof(token, nonce, session, addr string) string {
	return base64.RawURLEncoding.EncodeToString(mac([]byte(token), labelServer, nonce, session, addr))
}

// ConnAddr writes an end of a connection as both ends of it compare it: "ip:port" with
// IPv4-mapped IPv6 addresses as IPv4 and without an IPv6 zone (the server's LocalAddr,
// the client's RemoteAddr); any other address (net.Pipe's) as its String; "" for nil.
func ConnAddr(a net.Addr) string {
	if a == nil {
		return ""
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return a.String()
	}
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()).String()
}

// SessionKey is the key both ends derive for a session; it never travels.
func SessionKey(token, nonce, session string) []byte {
	return mac([]byte(token), labelSession, nonce, session)
}

// BodyHash is the hex SHA-256 of a request body, as the proof header carries it; "" for
// a request without a body.
func BodyHash(body []byte) string {
	if body == nil {
		return ""
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Proof is the signature of one request in a session.
type Proof struct {
	Session string // the session's ID
	Nonce   string // the client's nonce of the session
	Seq     uint64 // the request's number in the session, from 1, each used once
	Body    string // BodyHash of the body
	Sig     string // Sign(...) of the request
}

// Sign returns the signature of a request under a session key: its method, its request
// URI exactly as sent (path and query), its number and the hash of its body.
func Sign(key []byte, method, requestURI string, seq uint64, bodyHash string) string {
	return base64.RawURLEncoding.EncodeToString(
		mac(key, labelRequest, method, requestURI, strconv.FormatUint(seq, 10), bodyHash))
}

// Header returns the Authorization header value of p.
func (p Proof) Header() string {
	return fmt.Sprintf("%s session=%s, nonce=%s, seq=%d, body=%s, sig=%s", ProofScheme, p.Session, p.Nonce, p.Seq, p.Body, p.Sig)
}

// parseProof reads an Authorization header value of the proof scheme; ok is false for
// any other scheme.
func parseProof(v string) (p Proof, ok bool, err error) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
	if !strings.EqualFold(scheme, ProofScheme) {
		return Proof{}, false, nil
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, val, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found || fields[k] != "" {
			return Proof{}, true, errors.New("the proof header is malformed")
		}
		fields[k] = val
	}
	seq, err := strconv.ParseUint(fields["seq"], 10, 64)
	if err != nil || seq == 0 {
		return Proof{}, true, errors.New("the proof header has no valid seq")
	}
	p = Proof{Session: fields["session"], Nonce: fields["nonce"], Seq: seq, Body: fields["body"], Sig: fields["sig"]}
	if p.Session == "" || p.Nonce == "" || p.Sig == "" {
		return Proof{}, true, errors.New("the proof header lacks session, nonce or sig")
	}
	return p, true, nil
}

// sessionID is a session's ID: when it was issued, random bytes, and a MAC under the
// issuing process's own key, so that it is valid only at the process that issued it.
type sessionID struct {
	issued time.Time
}

// idLen is the length of a decoded session ID: issue time, random, MAC.
const idLen = 8 + 16 + 16

// issueID returns a new session ID under the process key.
func issueID(key []byte, now time.Time) string {
	b := make([]byte, idLen)
	binary.BigEndian.PutUint64(b, uint64(now.UnixNano()))
	_, _ = rand.Read(b[8:24])
	copy(b[24:], mac(key, labelID, string(b[:24]))[:16])
	return base64.RawURLEncoding.EncodeToString(b)
}

// checkID reads a session ID and checks its MAC under the process key.
func checkID(key []byte, id string) (sessionID, bool) {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != idLen || !hmac.Equal(b[24:], mac(key, labelID, string(b[:24]))[:16]) {
		return sessionID{}, false
	}
	return sessionID{issued: time.Unix(0, int64(binary.BigEndian.Uint64(b)))}, true
}
