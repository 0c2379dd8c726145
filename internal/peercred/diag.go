package peercred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
)

// sock_diag's INET_DIAG exact lookup (linux/inet_diag.h): one request names a socket by
// its addresses; the kernel answers with that socket's state, uid and inode, or ENOENT.
// Unlike the tables, it costs the same however many connections the machine has.
const (
	netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	nlmsgError       = 2  // NLMSG_ERROR
	nlmsgHdrLen      = 16
	diagReqLen       = 56 // struct inet_diag_req_v2
	diagMsgLen       = 72 // struct inet_diag_msg
)

// errNoDiag says that this kernel answers no sock_diag request.
var errNoDiag = errors.New("no sock_diag")

// diagSeq numbers the requests, so that an answer is matched to its request.
var diagSeq atomic.Uint32

// diagLookup asks the kernel for the TCP socket whose local address is local and remote
// address remote, IPv4 first for an IPv4 pair (an IPv6 socket speaking IPv4 is found that
// way too), then IPv6.
func diagLookup(local, remote netip.AddrPort) (socket, error) {
	families := []uint8{syscall.AF_INET6}
	if local.Addr().Is4() && remote.Addr().Is4() {
		families = []uint8{syscall.AF_INET, syscall.AF_INET6}
	}
	for _, family := range families {
		s, err := diagAsk(family, local, remote)
		if !errors.Is(err, errNotFound) {
			return s, err
		}
	}
	return socket{}, errNotFound
}

// diagAsk sends one exact lookup of the given family and reads its answer.
func diagAsk(family uint8, local, remote netip.AddrPort) (socket, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return socket{}, fmt.Errorf("%w: %v", errNoDiag, err)
	}
	defer syscall.Close(fd)
	seq := diagSeq.Add(1)
	if err := syscall.Sendto(fd, diagRequest(seq, family, local, remote), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return socket{}, fmt.Errorf("%w: send: %v", errNoDiag, err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return socket{}, fmt.Errorf("read sock_diag's answer: %w", err)
		}
		s, done, err := diagAnswer(buf[:n], seq)
		if done {
			return s, err
		}
	}
}

// diagRequest is an nlmsghdr and an inet_diag_req_v2 naming one TCP socket.
func diagRequest(seq uint32, family uint8, local, remote netip.AddrPort) []byte {
	b := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], sockDiagByFamily)
	ne.PutUint16(b[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(b[8:], seq)
	r := b[nlmsgHdrLen:]
	r[0], r[1] = family, syscall.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state: the answer says which
	id := r[8:]                     // struct inet_diag_sockid: ports and addresses in network order
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	copy(id[4:20], addrBytes(family, local.Addr()))
	copy(id[20:36], addrBytes(family, remote.Addr()))
	ne.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], ^uint32(0))
	return b
}

// addrBytes is addr as inet_diag_sockid holds it: 4 bytes for IPv4, 16 for IPv6 (an IPv4
// address in its mapped form).
func addrBytes(family uint8, addr netip.Addr) []byte {
	if family == syscall.AF_INET {
		a := addr.Unmap().As4()
		return a[:]
	}
	a := addr.As16()
	return a[:]
}

// diagAnswer reads the netlink messages in b: the socket, or the kernel's error. done is
// false when b holds no answer to request seq.
func diagAnswer(b []byte, seq uint32) (s socket, done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHdrLen {
		n := int(ne.Uint32(b[0:]))
		if n < nlmsgHdrLen || n > len(b) {
			return socket{}, true, fmt.Errorf("sock_diag: a message of %d bytes in %d", n, len(b))
		}
		typ, msg := ne.Uint16(b[4:]), b[nlmsgHdrLen:n]
		if ne.Uint32(b[8:]) == seq {
			switch {
			case typ == nlmsgError && len(msg) >= 4:
				errno := -int32(ne.Uint32(msg))
				if errno == 0 || syscall.Errno(errno) == syscall.ENOENT {
					return socket{}, true, errNotFound
				}
				return socket{}, true, fmt.Errorf("sock_diag: %w", os.NewSyscallError("lookup", syscall.Errno(errno)))
			case typ == sockDiagByFamily && len(msg) >= diagMsgLen:
				return socket{state: msg[1], uid: int(ne.Uint32(msg[64:])), inode: uint64(ne.Uint32(msg[68:]))}, true, nil
			}
		}
		next := (n + 3) &^ 3 // messages are 4-byte aligned
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return socket{}, false, nil
}
