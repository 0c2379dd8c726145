package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/trainyard/trainyard/internal/server"
)

// userAgent is what the client tells the server it is.
const userAgent = "trainyard-client"

// maxErrorBody is the most of an error response the client reads.
const maxErrorBody = 64 << 10

// Client talks to one trainyard server. Its methods are safe for concurrent use.
type Client struct {
	base    *url.URL // scheme and host, no trailing slash
	addrErr error    // why the address given to New is unusable, reported by every call
	token   string
	// withheld, when the token file's token was not sent to this server, is the message
	// that replaces the server's answer to a 401.
	withheld string
	// bearer sends the token itself (WithBearer) instead of proofs in a session.
	bearer bool
	sess   sessions
	http   *http.Client
	tls    *tls.Config                                                       // for https servers, also used by the log WebSocket
	poll   time.Duration                                                     // how often Follow reads a rank's log again
	retry  time.Duration                                                     // how long Follow tries to reach a server that went away
	dial   func(ctx context.Context, network, addr string) (net.Conn, error) // nil: the network
}

// Option adjusts a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc instead of a client of its
// own (which has no overall timeout, as following a log takes as long as the job).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithTLSConfig sets the TLS configuration for an https server, to trust a private CA,
// say. It replaces the HTTP client's transport with one that uses cfg.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = cfg
		c.http = &http.Client{Transport: tr}
		c.tls = cfg
	}
}

// WithDialer makes every connection to the server, requests and the log WebSocket,
// with dial: a server in the same process (trainyard server's dashboard) is reached
// through an in-memory listener that way. Plain http only.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *Client) {
		c.dial = dial
		c.http = &http.Client{Transport: &http.Transport{DialContext: dial}}
	}
}

// WithBearer makes the client send the token itself, "Authorization: Bearer <token>",
// as Ray's clients do, instead of proving in a session that it holds it (the default,
// see ErrNotTheServer). Only for a server that nobody else can stand in for: one in the
// same process, reached WithDialer.
func WithBearer() Option {
	return func(c *Client) { c.bearer = true }
}

// WithPollInterval sets how often Follow reads a rank's log again; the default is one
// second.
func WithPollInterval(d time.Duration) Option {
	return func(c *Client) { c.poll = d }
}

// WithReconnectFor sets how long Follow keeps trying to reach a server that went away
// while the job runs (a server restart, say) before it gives up; the default is 30
// seconds.
func WithReconnectFor(d time.Duration) Option {
	return func(c *Client) { c.retry = d }
}

// New returns a client of the server at address: a URL such as http://127.0.0.1:8265,
// or host:port, which means http. token is sent with every request; empty sends none.
// An unusable address is reported by the first call.
func New(address, token string, opts ...Option) *Client {
	c := &Client{token: token, http: &http.Client{}, poll: time.Second, retry: 30 * time.Second}
	c.base, c.addrErr = parseAddress(address)
	for _, o := range opts {
		o(c)
	}
	return c
}

// Address returns the server's address as the client uses it, such as
// http://127.0.0.1:8265.
func (c *Client) Address() string {
	if c.base == nil {
		return ""
	}
	return c.base.String()
}

// parseAddress reads a server address: a URL with scheme http or https and a host, or
// host:port.
func parseAddress(address string) (*url.URL, error) {
	a := strings.TrimSpace(address)
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(strings.TrimRight(a, "/"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("server address %q: %w", address, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("server address %q: the scheme must be http or https", address)
	case u.Host == "":
		return nil, fmt.Errorf("server address %q has no host; give one such as %s", address, DefaultAddress)
	case u.Path != "" || u.RawQuery != "" || u.User != nil:
		return nil, fmt.Errorf("server address %q: give the scheme, host and port only, such as %s", address, DefaultAddress)
	}
	return u, nil
}

// APIError is a request the server refused: its HTTP status and the message of its JSON
// body {"error": "..."}.
type APIError struct {
	Status  int
	Message string
}

// Error returns the server's message, on one line.
func (e *APIError) Error() string { return e.Message }

// IsNotFound reports whether err is the server's answer that the job (or what else was
// asked for) does not exist.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// request is one call of the API.
type request struct {
	method string
	path   string     // under the server's address, escaped
	query  url.Values // optional
	body   any        // sent as JSON when not nil
	raw    []byte     // sent as application/octet-stream when not nil
	want   int        // the status of success
}

// do sends r and decodes the answer into out: a *string gets the body as text, an
// io.Writer has it copied to it, anything else non-nil gets it decoded from JSON.
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, _, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != r.want {
		return c.refusal(resp)
	}
	switch out := out.(type) {
	case nil:
		return nil
	case io.Writer:
		if _, err := io.Copy(out, resp.Body); err != nil {
			return fmt.Errorf("%s %s: read the answer: %w", r.method, r.path, err)
		}
		return nil
	case *string:
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("%s %s: read the answer: %w", r.method, r.path, err)
		}
		*out = string(data)
		return nil
	default:
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", r.method, r.path, err)
		}
		return nil
	}
}

// send builds and sends the HTTP request of r, signed in the client's session, and
// returns the answer and the key the server seals secrets in it with (see authorize). A
// server that forgot the session (it restarted, or the session expired) is asked for a
// new one, and the request sent again, once.
func (c *Client) send(ctx context.Context, r request) (*http.Response, []byte, error) {
	if c.addrErr != nil {
		return nil, nil, c.addrErr
	}
	body, err := r.encode()
	if err != nil {
		return nil, nil, err
	}
	for try := 0; ; try++ {
		req, key, err := c.build(ctx, r, body)
		if err != nil {
			return nil, nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, nil, c.unreachable(ctx, err)
		}
		if try > 0 || !stale(resp) {
			return resp, key, nil
		}
		resp.Body.Close()
		c.dropSession(sessionOf(req.Header))
	}
}

// encode returns the body of r: its JSON, its raw bytes, or nil for none.
func (r request) encode() ([]byte, error) {
	switch {
	case r.raw != nil:
		return r.raw, nil
	case r.body != nil:
		data, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode the request: %w", r.method, r.path, err)
		}
		return data, nil
	}
	return nil, nil
}

// build makes the HTTP request of r with body, its headers and its proof, and returns
// the key of its proof (see authorize).
func (c *Client) build(ctx context.Context, r request, body []byte) (*http.Request, []byte, error) {
	u := *c.base
	u.RawPath, u.Path = r.path, mustUnescape(r.path)
	u.RawQuery = r.query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), rd)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	c.setHeaders(req.Header)
	switch {
	case r.raw != nil:
		req.Header.Set("Content-Type", "application/octet-stream")
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	key, err := c.authorize(ctx, req.Header, r.method, req.URL.RequestURI(), body)
	if err != nil {
		return nil, nil, err
	}
	return req, key, nil
}

// setHeaders sets the headers every request carries but its proof.
func (c *Client) setHeaders(h http.Header) {
	h.Set("User-Agent", userAgent)
	h.Set("Accept", "application/json")
	if who := Submitter(); who != "" {
		h.Set(HeaderUser, who)
	}
}

// unreachable explains a request that got no answer.
func (c *Client) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no trainyard server at %s (connection refused): start one with `trainyard server`, "+
			"or name another with --address or %s", c.base, EnvAddress)
	}
	return fmt.Errorf("reach the trainyard server at %s: %w", c.base, err)
}

// mustUnescape returns the path that an escaped path stands for; the client builds
// only valid ones.
func mustUnescape(escaped string) string {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return escaped
	}
	return p
}

// refusal reads a refusal; a 401 when the client withheld the token file's token says so.
func (c *Client) refusal(resp *http.Response) error {
	err := decodeError(resp)
	if resp.StatusCode == http.StatusUnauthorized && c.withheld != "" {
		return &APIError{Status: resp.StatusCode, Message: c.withheld}
	}
	return err
}

// decodeError reads a refusal: the message of the server's {"error": ...} body, or the
// status and the first line of any other body.
func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body struct {
		Error string `json:"error"`
	}
	msg := ""
	if json.Unmarshal(data, &body) == nil {
		msg = body.Error
	}
	if msg == "" {
		msg = fmt.Sprintf("the server answered %s", resp.Status)
		if line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n"); line != "" {
			msg += ": " + truncate(line, 200)
		}
	}
	return &APIError{Status: resp.StatusCode, Message: oneLine(msg)}
}

// oneLine joins the lines of s with "; ".
func oneLine(s string) string {
	lines := strings.FieldsFunc(strings.TrimSpace(s), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// HeaderUser is the header that names the client's user and host to the server.
const HeaderUser = server.HeaderUser

// Submitter is user@host of this process, which the client names to the server (the job
// list's "who"); "" when neither is known.
var Submitter = sync.OnceValue(submitter)

func submitter() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name != "" && host != "":
		return name + "@" + host
	case name != "":
		return name
	}
	return host
}
