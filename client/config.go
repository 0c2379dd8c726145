package client

import (
	"fmt"
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
