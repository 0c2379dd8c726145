package client

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/trainyard/trainyard/internal/auth"
)

// DefaultAddress is where `trainyard server` listens unless told otherwise.
const DefaultAddress = "http://127.0.0.1:8265"

// Environment variables that choose the server and its token.
const (
	// EnvAddress names the server's address when no address is given.
	EnvAddress = "TRAINYARD_ADDRESS"
	// EnvToken holds the server's token itself, for a server on another machine.
	EnvToken = "TRAINYARD_TOKEN"
)

// ResolveAddress returns the server address to use: address when it is not empty, else
// $TRAINYARD_ADDRESS, else DefaultAddress.
func ResolveAddress(address string) string {
	if a := strings.TrimSpace(address); a != "" {
		return a
	}
	if a := strings.TrimSpace(os.Getenv(EnvAddress)); a != "" {
		return a
	}
	return DefaultAddress
}

// Connect returns a client of the server at address (as ResolveAddress picks it) with
// the token to send it. A token the user gave, in tokenFile (--token-file) or
// $TRAINYARD_TOKEN, is sent wherever the address points. The token found by itself in the
// server's token file ($TRAINYARD_TOKEN_FILE, else ~/.config/trainyard/token) is sent
// only to a server that file belongs to, as its servers file says (auth.Owners); to any
// other address the client sends no token, and when that server answers 401 the error
// says whose token it is and how to send it there.
func Connect(address, tokenFile string, opts ...Option) (*Client, error) {
	c := New(ResolveAddress(address), "", opts...)
	if tokenFile != "" || strings.TrimSpace(os.Getenv(EnvToken)) != "" {
		tok, err := ResolveToken(tokenFile)
		c.token = tok
		return c, err
	}
	path, err := auth.DefaultTokenPath()
	if err != nil {
		return nil, err
	}
	tok, err := ResolveToken("")
	if err != nil {
		return nil, err
	}
	owners, err := auth.LoadOwners(path)
	if err != nil {
		return nil, err
	}
	if c.base == nil { // an unusable address: the first call reports it
		return c, nil
	}
	target := hostPort(c.base)
	if owners.Allows(target) {
		c.token = tok
		return c, nil
	}
	c.withheld = fmt.Sprintf("the token in %s belongs to %s, not %s; pass --token-file (or %s) to send it there",
		path, owners, target, EnvToken)
	return c, nil
}

// hostPort returns the host and port a URL reaches, with the scheme's port when it has
// none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// ResolveToken returns the server's token: the one in tokenFile when it is not empty,
// else $TRAINYARD_TOKEN, else the one in the server's token file, which
// auth.DefaultTokenPath names ($TRAINYARD_TOKEN_FILE, else
// ~/.config/trainyard/token). A token file is checked as the server checks it (mode
// 0600, owned by this user, one well-formed token).
func ResolveToken(tokenFile string) (string, error) {
	if tokenFile != "" {
		return auth.Load(tokenFile)
	}
	if tok := strings.TrimSpace(os.Getenv(EnvToken)); tok != "" {
		return tok, nil
	}
	path, err := auth.DefaultTokenPath()
	if err != nil {
		return "", err
	}
	tok, err := auth.Load(path)
	if err != nil {
		return "", fmt.Errorf("%w; for a server on another machine, set %s to its token", err, EnvToken)
	}
	return tok, nil
}
