package auth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// DefaultListen is the address `trainyard server` listens on unless told otherwise. A
// token file without a servers file (one made before servers files existed) belongs to
// it alone.
const DefaultListen = "127.0.0.1:8265"

// serversSuffix names the servers file beside a token file.
const serversSuffix = ".servers"

// maxServers bounds the servers file: the addresses of the last servers that started.
const maxServers = 16

// serversHeader starts every servers file.
const serversHeader = "# The addresses of the trainyard servers that use the token in the file beside this one,\n" +
	"# the newest last. The CLI sends that token, found by itself, only to these addresses.\n" +
	"# Each server adds its own when it starts.\n"

// ServersPath returns the servers file of the token file at tokenPath: the same name with
// ".servers" added.
func ServersPath(tokenPath string) string { return tokenPath + serversSuffix }

// Owners are the servers a token file belongs to: the addresses they listen on,
// "host:port".
type Owners struct {
	// Addrs are the listen addresses, as the servers recorded them.
	Addrs []string
	// Legacy is set when the token file has no servers file; Addrs is then DefaultListen.
	Legacy bool
}

// String lists the addresses: "127.0.0.1:8265" or "127.0.0.1:8265 or 127.0.0.1:9000".
func (o Owners) String() string { return strings.Join(o.Addrs, " or ") }

// Allows reports whether a token of the token file these are the owners of may be sent
// to a server at hostport, the host and port of the address a client was given. It does
// when a server listens there: the same host (IP addresses compared in canonical form,
// names without case) and port; or, for a server listening on all interfaces, a loopback
// address on its port (127.0.0.1 for 0.0.0.0; 127.0.0.1, ::1 and localhost for :: or an
// empty host, which Go listens on with both IPv4 and IPv6). "localhost" does not match
// 127.0.0.1 or ::1 by itself: it names both, and another user may listen on the one the
// server does not.
func (o Owners) Allows(hostport string) bool {
	for _, a := range o.Addrs {
		if listensOn(a, hostport) {
			return true
		}
	}
	return false
}

// listensOn reports whether a server listening on listen answers at target.
func listensOn(listen, target string) bool {
	lh, lp, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	th, tp, err := net.SplitHostPort(target)
	if err != nil || !samePort(lp, tp) {
		return false
	}
	lh, th = normalizeName(lh), normalizeName(th)
	if lh == th && th != "" {
		return true
	}
	tip, terr := netip.ParseAddr(th)
	switch lh {
	case "", "::":
		return th == "localhost" || terr == nil && tip.IsLoopback()
	case "0.0.0.0":
		return terr == nil && tip.Is4() && tip.IsLoopback()
	}
	return false
}

// samePort reports whether two ports are the same number.
func samePort(a, b string) bool {
	pa, erra := strconv.ParseUint(a, 10, 16)
	pb, errb := strconv.ParseUint(b, 10, 16)
	return erra == nil && errb == nil && pa == pb
}

// isPort reports whether s is a port number.
func isPort(s string) bool {
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}

// LoadOwners reads the servers file of the token file at tokenPath. Without one the
// token file belongs to DefaultListen alone (Legacy). The servers file is checked as the
// token file is (owner, mode); a malformed one is an error.
func LoadOwners(tokenPath string) (Owners, error) {
	path := ServersPath(tokenPath)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return Owners{Addrs: []string{DefaultListen}, Legacy: true}, nil
	}
	if err != nil {
		return Owners{}, fmt.Errorf("read the servers of token file %s: %w", tokenPath, err)
	}
	defer f.Close()
	if err := checkServersFile(f, path); err != nil {
		return Owners{}, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return Owners{}, fmt.Errorf("lock %s: %w", path, err)
	}
	addrs, err := readServers(f, path)
	if err != nil {
		return Owners{}, err
	}
	return Owners{Addrs: addrs}, nil
}

// RecordServer adds addr, the address a server listens on ("host:port", the port it got
// rather than 0), to the servers file of the token file at tokenPath, last, creating the
// file with mode 0600. The file keeps the last 16 addresses; concurrent calls are
// serialized with a lock on it.
func RecordServer(tokenPath, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("record server %q: %w", addr, err)
	}
	path := ServersPath(tokenPath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("record the server's address beside its token: %w", err)
	}
	defer f.Close()
	if err := checkServersFile(f, path); err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	addrs, err := readServers(f, path)
	if err != nil {
		return err
	}
	addrs = append(slices.DeleteFunc(addrs, func(a string) bool { return a == addr }), addr)
	addrs = addrs[max(0, len(addrs)-maxServers):]
	return rewrite(f, path, serversHeader+strings.Join(addrs, "\n")+"\n")
}

// checkServersFile refuses a servers file that the token file's rules refuse.
func checkServersFile(f *os.File, path string) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := checkFileInfo(path, info); err != nil {
		return fmt.Errorf("servers file: %w", err)
	}
	return nil
}

// readServers reads the addresses of a servers file from its start.
func readServers(f *os.File, path string) ([]string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var addrs []string
	sc := bufio.NewScanner(io.LimitReader(f, maxTokenFileSize))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, port, err := net.SplitHostPort(line); err != nil || !isPort(port) {
			return nil, fmt.Errorf("servers file %s, line %d: %q is not host:port; delete the file, and each server "+
				"writes its address again when it starts", path, n, line)
		}
		addrs = append(addrs, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return addrs, nil
}

// rewrite replaces the contents of f with s and syncs it.
func rewrite(f *os.File, path, s string) error {
	err := f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(s), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
