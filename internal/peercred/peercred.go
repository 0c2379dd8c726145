// Package peercred tells who owns the other end of a TCP connection from this machine,
// which TCP itself does not say. The kernel knows each socket's owner: this package asks it
// for the client's socket by its exact addresses (sock_diag's INET_DIAG lookup, one
// socket, whatever the number of connections), or reads its socket tables (/proc/net/tcp
// and tcp6) where that is not there; both see the reading process's network namespace. A
// server on this machine can so refuse the clients of other local users, which a Unix
// socket would do with SO_PEERCRED.
//
// A client counts as local when its socket is in those tables or its address is one of
// this namespace's (the loopback, an interface's). Linux lets a socket bound to the
// machine's own address (its eth0 address, say) connect to 127.0.0.1, so the loopback is
// not the only local source. A local client is admitted only when its socket is found
// connected (ESTABLISHED, with a socket inode): a client that closed at once leaves a row
// in TIME_WAIT or FIN_WAIT whose uid is 0 and no longer its own, and is refused, as is
// one whose socket is not found at all.
package peercred

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
)

// ErrRemote is returned for a connection from another machine (or network namespace): its
// owner cannot be known here.
var ErrRemote = errors.New("peer on another machine")

// socket is what the kernel says of a client's socket.
type socket struct {
	state uint8 // tcpEstablished, ...
	uid   int
	inode uint64
}

// tcpEstablished is the kernel's TCP_ESTABLISHED.
const tcpEstablished = 1

// stateNames name the kernel's TCP states (include/net/tcp_states.h).
var stateNames = map[uint8]string{1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
	6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING", 12: "NEW_SYN_RECV"}

// errNotFound is a lookup that found no socket with the addresses asked for.
var errNotFound = errors.New("no such socket")

// lookup finds the socket whose local and remote addresses are local and remote: the
// kernel's sock_diag, then its tables. A variable, so that tests can count lookups.
var lookup = func(local, remote netip.AddrPort) (socket, error) {
	s, err := diagLookup(local, remote)
	if errors.Is(err, errNoDiag) {
		return tableLookup(local, remote)
	}
	return s, err
}

// Owner returns the uid that owns the client end of c, a connection accepted from this
// machine; ErrRemote when c's client is not on this machine.
func Owner(c net.Conn) (int, error) {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return -1, fmt.Errorf("not a TCP connection: %s", c.RemoteAddr())
	}
	// The client's socket has the peer's address as its local one and ours as its remote.
	s, err := lookup(unmap(remote.AddrPort()), unmap(local.AddrPort()))
	switch {
	case errors.Is(err, errNotFound):
		isLocal, lerr := localAddress(remote.AddrPort().Addr(), local.AddrPort().Addr())
		if lerr != nil {
			return -1, fmt.Errorf("tell whether %s is this machine's: %w", remote, lerr)
		}
		if !isLocal {
			return -1, ErrRemote
		}
		return -1, fmt.Errorf("the client's socket %s is not in this machine's socket tables (it closed?): its owner cannot be told", remote)
	case err != nil:
		return -1, fmt.Errorf("find the owner of %s: %w", remote, err)
	case s.state != tcpEstablished || s.inode == 0:
		return -1, fmt.Errorf("the client's socket %s is %s, not connected: its owner cannot be told", remote, stateName(s.state))
	}
	return s.uid, nil
}

// SameUser returns nil when c's client runs as this process's effective user or is on
// another machine (its owner cannot be known there), and an error naming the owner, or
// saying why it cannot be told, otherwise.
func SameUser(c net.Conn) error {
	uid, err := Owner(c)
	if errors.Is(err, ErrRemote) {
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

// localAddress reports whether addr is one of this network namespace's: a loopback
// address, the address the connection came in on, or an interface's.
func localAddress(addr, ours netip.Addr) (bool, error) {
	addr = addr.Unmap()
	if addr.IsLoopback() || addr == ours.Unmap() || addr.IsUnspecified() {
		return true, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == addr {
			return true, nil
		}
	}
	return false, nil
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

func stateName(s uint8) string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("in state %d", s)
}
