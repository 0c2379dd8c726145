// Package peercred tells who owns the other end of a loopback TCP connection, which TCP
// itself does not say: the kernel's socket tables (/proc/net/tcp and tcp6 of the reading
// process's network namespace) list each socket's local and remote address and its
// owner's uid. A server on 127.0.0.1 can so refuse the clients of other local users,
// which a Unix socket would do with SO_PEERCRED.
package peercred

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ErrNotLoopback is returned for a connection whose peer is not on this machine's
// loopback: its owner cannot be known.
var ErrNotLoopback = errors.New("peer not on the loopback")

// tables are the kernel's TCP socket tables, IPv4 then IPv6.
var tables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// Owner returns the uid that owns the client end of c, a connection accepted on a
// loopback address.
func Owner(c net.Conn) (int, error) {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || !remote.IP.IsLoopback() {
		return -1, ErrNotLoopback
	}
	// The client's socket has the peer's address as its local one and ours as its remote.
	want := [2]netip.AddrPort{remote.AddrPort(), local.AddrPort()}
	for _, table := range tables {
		uid, err := find(table, want)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, errNotFound) {
			return -1, err
		}
	}
	return -1, fmt.Errorf("find the socket of %s in %s: %w", remote, strings.Join(tables, " and "), errNotFound)
}

// SameUser returns nil when c's client runs as this process's effective user or is not
// on the loopback (its owner cannot be known there), and an error naming the owner
// otherwise.
func SameUser(c net.Conn) error {
	uid, err := Owner(c)
	if errors.Is(err, ErrNotLoopback) {
		return nil
	}
	if err != nil {
		return err
	}
	if uid != os.Geteuid() {
		return fmt.Errorf("the client runs as uid %d, not as this job's user (uid %d)", uid, os.Geteuid())
	}
	return nil
}

var errNotFound = errors.New("no such socket")

// find returns the uid of the socket of table whose local and remote addresses are want.
func find(table string, want [2]netip.AddrPort) (int, error) {
	f, err := os.Open(table)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return -1, errNotFound // no IPv6, say
		}
		return -1, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		l, err1 := parseAddr(fields[1])
		r, err2 := parseAddr(fields[2])
		if err1 != nil || err2 != nil || !same(l, want[0]) || !same(r, want[1]) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return -1, fmt.Errorf("%s: uid %q: %w", table, fields[7], err)
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return -1, fmt.Errorf("read %s: %w", table, err)
	}
	return -1, errNotFound
}

// same compares addresses, an IPv4 one equal to its IPv4-mapped IPv6 form.
func same(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseAddr reads an address of the kernel's tables: hex of the address in 32-bit words of
// the machine's byte order (little-endian here), a colon, the port in hex.
func parseAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", port)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(p)), nil
}
