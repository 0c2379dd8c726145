package auth

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/trainyard/trainyard/internal/durable"
)

// EnvTokenFile is the environment variable that names the token file, overriding the
// default path.
const EnvTokenFile = "TRAINYARD_TOKEN_FILE"

// tokenBytes is how many random bytes a new token holds.
const tokenBytes = 32

// minTokenLen is the shortest token a token file may hold: 32 characters of the Bearer
// alphabet carry at least 128 bits when they are random.
const minTokenLen = 32

// maxTokenFileSize bounds what Load reads: a token file holds one short line.
const maxTokenFileSize = 4096

// DefaultTokenPath returns where the token file is: $TRAINYARD_TOKEN_FILE, else
// $XDG_CONFIG_HOME/trainyard/token, else ~/.config/trainyard/token. A relative
// $XDG_CONFIG_HOME is ignored, as the XDG Base Directory specification says.
func DefaultTokenPath() (string, error) {
	return configFile(EnvTokenFile, "token", "the token file")
}

// EnvDashboardTokenFile is the environment variable that names the token file of
// 'trainyard dashboard', overriding DefaultDashboardTokenPath.
const EnvDashboardTokenFile = "TRAINYARD_DASHBOARD_TOKEN_FILE"

// DefaultDashboardTokenPath returns where the token of 'trainyard dashboard' (the
// dashboard of local runs or of a cluster) is kept: $TRAINYARD_DASHBOARD_TOKEN_FILE, else
// dashboard-token beside the server's token file's default place (not $TRAINYARD_TOKEN_FILE:
// the server's token is not the dashboard's).
func DefaultDashboardTokenPath() (string, error) {
	return configFile(EnvDashboardTokenFile, "dashboard-token", "the dashboard's token file")
}

// configFile returns the file that $env names, else name in $XDG_CONFIG_HOME/trainyard,
// else in ~/.config/trainyard. A relative $XDG_CONFIG_HOME is ignored, as the XDG Base
// Directory specification says. what names the file in an error.
func configFile(env, name, what string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	if dir := os.Getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "trainyard", name), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find %s (set %s to name it): %w", what, env, err)
	}
	return filepath.Join(home, ".config", "trainyard", name), nil
}

// LoadOrCreate returns the token in the file at path, creating the file with a new random
// token when there is none. A new file is complete before it appears: it is written to a
// temporary file in the same folder, synced, and then linked to path, which fails if path
// exists; so when several servers start at once, one file wins and all of them return its
// token. A missing parent folder is created with mode 0700 and the file has mode 0600. An
// existing file is checked as Load checks it.
func LoadOrCreate(path string) (string, error) {
	tok, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	return create(path)
}

// Load returns the token in the file at path. It refuses a file that group or others may
// read or write, one owned by another user, and one that does not hold a well-formed
// token; the errors say how to fix each. An error for a missing file wraps
// fs.ErrNotExist.
func Load(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no token file at %s (the server creates it when it starts; %s names another file): %w",
			path, EnvTokenFile, err)
	}
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	if err := checkFileInfo(path, info); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFileSize+1))
	if err != nil {
		return "", fmt.Errorf("read token file %s: %w", path, err)
	}
	return parseToken(path, data)
}

// checkFileInfo refuses a token file that is not a regular file, that group or others may
// use, or that another user owns.
func checkFileInfo(path string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("token file %s is not a regular file (mode %s)", path, info.Mode())
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("token file %s has mode %#o; it must be readable by its owner only: chmod 600 %s",
			path, perm, path)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("token file %s is owned by uid %d, not by this user (uid %d), who could read or replace it: "+
			"chown %d %s, or delete it to have a new one made", path, st.Uid, os.Geteuid(), os.Geteuid(), path)
	}
	return nil
}

// parseToken checks the contents of a token file: one line holding one token.
func parseToken(path string, data []byte) (string, error) {
	if len(data) > maxTokenFileSize {
		return "", fmt.Errorf("token file %s is malformed: it is over %d bytes, and a token file holds one line; "+
			"delete it to have a new token made", path, maxTokenFileSize)
	}
	tok := strings.TrimSpace(string(data))
	switch {
	case tok == "":
		return "", fmt.Errorf("token file %s is empty: write a token into it, or delete it to have a new token made when the server starts", path)
	case !validToken(tok):
		return "", fmt.Errorf("token file %s is malformed: it must hold one line, a token of letters, digits and - . _ ~ + / "+
			"(then optional =); delete it to have a new token made", path)
	case len(tok) < minTokenLen:
		return "", fmt.Errorf("token file %s is malformed: its token has %d characters, and at least %d are needed to be hard to guess; "+
			"delete it to have a new token made", path, len(tok), minTokenLen)
	}
	return tok, nil
}

// validToken reports whether s has the syntax of a Bearer token (RFC 6750, b64token):
// letters, digits and - . _ ~ + /, then any number of =.
func validToken(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for _, c := range []byte(body) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// NewToken returns a new random token (32 bytes, base64url): a server's, or the in-cluster Jobs API's.
func NewToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// create writes a new token file at path, or returns the token of the file that another
// process created there first.
func create(path string) (string, error) {
	dir := filepath.Dir(path)
	if err := ensureDir(dir); err != nil {
		return "", err
	}
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	tmp, err := writeTemp(dir, tok)
	if err != nil {
		return "", err
	}
	err = os.Link(tmp, path)
	_ = os.Remove(tmp)
	if errors.Is(err, fs.ErrExist) {
		return Load(path) // another server made it first: use its token
	}
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	if err := durable.Sync(dir); err != nil {
		return "", fmt.Errorf("create token file %s: %w", path, err)
	}
	return tok, nil
}

// ensureDir creates the folder dir with mode 0700 if it does not exist. An existing
// folder is left as it is.
func ensureDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create token folder: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil { // in case the umask took bits away
		return fmt.Errorf("create token folder: %w", err)
	}
	return nil
}

// writeTemp writes tok to a new private temporary file in dir, syncs it and returns its
// path.
func writeTemp(dir, tok string) (string, error) {
	f, err := os.CreateTemp(dir, ".token-*.tmp") // mode 0600
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write token file %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
