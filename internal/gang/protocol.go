package gang

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// MaxLine bounds one line of the protocol, envelope and newline included.
const MaxLine = 64 << 10

// Outcome is how a member's part of an attempt, or the whole gang, ended.
type Outcome string

// The ways an attempt ends.
const (
	Succeeded Outcome = "succeeded"
	Failed    Outcome = "failed"
	// Hung is a gang that printed and reported nothing for the job's hang timeout.
	Hung Outcome = "hung"
)

// Final reasons: why a gang that finished failed must not be restarted by anyone. They are
// the reasons of the TrainJob's Failed condition.
const (
	// FinalRestarts: a rank failed with no restarts left (maxRestarts).
	FinalRestarts = "WorkerFailed"
	// FinalDisruptions: a worker was lost once too often (maxDisruptions).
	FinalDisruptions = "TooManyDisruptions"
)

// Message types.
const (
	typeChallenge = "challenge"
	typeHello     = "hello"
	typeWelcome   = "welcome"
	typeRefused   = "refused"
	typeStart     = "start"
	typeStop      = "stop"
	typeFinish    = "finish"
	typeEnded     = "ended"
	typeStopped   = "stopped"
	typeLeaving   = "leaving"
)

// message is one message of the protocol; each type uses some of the fields.
type message struct {
	Type string `json:"type"`
	Seq  uint64 `json:"seq"`
	// Nonce is the coordinator's (challenge) or the member's (hello).
	Nonce       string  `json:"nonce,omitempty"`
	Worker      int     `json:"worker"`
	Pod         string  `json:"pod,omitempty"`
	Incarnation string  `json:"incarnation,omitempty"`
	Attempt     int     `json:"attempt,omitempty"`
	Node        int     `json:"node,omitempty"`
	Nodes       int     `json:"nodes,omitempty"`
	Outcome     Outcome `json:"outcome,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	Rank        int     `json:"rank"`
	ExitCode    int     `json:"exitCode"`
	Final       string  `json:"final,omitempty"`
	Restarts    int     `json:"restarts,omitempty"`
	Disruptions int     `json:"disruptions,omitempty"`
}

// envelope is one line: the message as sent, and its MAC.
type envelope struct {
	MAC string          `json:"mac,omitempty"`
	Msg json.RawMessage `json:"msg"`
}

// errProtocol marks a peer that broke the protocol: a line too long or malformed, a bad
// MAC, a sequence number out of order, an unexpected message.
var errProtocol = errors.New("gang protocol")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// link is one connection's framing: bounded lines, MACs, sequence numbers. send and recv
// may run in two goroutines at once, each in one.
type link struct {
	conn    net.Conn
	r       *bufio.Reader
	key     []byte // nil: no MACs
	sent    uint64
	got     uint64
	timeout time.Duration // for each write
}

// writeTimeout bounds each write to a peer.
const writeTimeout = 10 * time.Second

func newLink(conn net.Conn) *link {
	return &link{conn: conn, r: bufio.NewReaderSize(conn, MaxLine), timeout: writeTimeout}
}

// send writes m with the next sequence number, under the link's key.
func (l *link) send(m message) error {
	l.sent++
	m.Seq = l.sent
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Type, err)
	}
	env := envelope{Msg: body}
	if l.key != nil {
		env.MAC = sign(l.key, body)
	}
	line, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Type, err)
	}
	if len(line) >= MaxLine {
		return fmt.Errorf("encode %s: %d bytes, over the limit of %d", m.Type, len(line), MaxLine)
	}
	if err := l.conn.SetWriteDeadline(time.Now().Add(l.timeout)); err != nil {
		return fmt.Errorf("send %s: %w", m.Type, err)
	}
	if _, err := l.conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("send %s: %w", m.Type, err)
	}
	return nil
}

// readRaw reads one line and returns its envelope, unverified.
func (l *link) readRaw() (envelope, error) {
	line, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return envelope{}, protocolError("a line longer than %d bytes", MaxLine)
	}
	if err != nil {
		return envelope{}, err
	}
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil || len(env.Msg) == 0 {
		return envelope{}, protocolError("a line that is not an envelope: %v", err)
	}
	return env, nil
}

// open checks env's MAC and sequence number and decodes its message.
func (l *link) open(env envelope) (message, error) {
	if l.key != nil && !verify(l.key, env.Msg, env.MAC) {
		return message{}, protocolError("a message whose HMAC does not verify (not the gang's secret?)")
	}
	var m message
	if err := json.Unmarshal(env.Msg, &m); err != nil {
		return message{}, protocolError("a malformed message: %v", err)
	}
	if m.Seq != l.got+1 {
		return message{}, protocolError("message %d after %d (replayed or reordered)", m.Seq, l.got)
	}
	l.got = m.Seq
	return m, nil
}

// recv reads, checks and decodes the next message.
func (l *link) recv() (message, error) {
	env, err := l.readRaw()
	if err != nil {
		return message{}, err
	}
	return l.open(env)
}

func (l *link) close() { _ = l.conn.Close() }

// nonce returns 16 random bytes in hex.
func nonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// linkKey derives a connection's MAC key from the gang's secret and both nonces, or nil
// without a secret.
func linkKey(secret []byte, coordinator, member string) []byte {
	if len(secret) == 0 {
		return nil
	}
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "trainyard-gang-v1\n%s\n%s", coordinator, member)
	return h.Sum(nil)
}

func sign(key, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func verify(key, body []byte, mac string) bool {
	got, err := hex.DecodeString(mac)
	if err != nil {
		return false
	}
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return hmac.Equal(got, h.Sum(nil))
}

// keepAlive finds a peer that vanished (its node lost, its pod's network gone) in about
// 20 s instead of the kernel's default of hours.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}

func setKeepAlive(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(keepAlive)
	}
}
