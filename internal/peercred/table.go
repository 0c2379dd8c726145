package peercred

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// tables are the kernel's TCP socket tables, IPv4 then IPv6.
var tables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// tableLookup finds a socket in the kernel's tables: what lookup falls back to where
// sock_diag is not there. It reads the whole tables, so its cost grows with the machine's
// connections.
func tableLookup(local, remote netip.AddrPort) (socket, error) {
	for _, table := range tables {
		s, err := find(table, [2]netip.AddrPort{local, remote})
		if !errors.Is(err, errNotFound) {
			return s, err
		}
	}
	return socket{}, errNotFound
}

// find returns the socket of table whose local and remote addresses are want.
func find(table string, want [2]netip.AddrPort) (socket, error) {
	f, err := os.Open(table)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return socket{}, errNotFound // no IPv6, say
		}
		return socket{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		l, err1 := parseAddr(fields[1])
		r, err2 := parseAddr(fields[2])
		if err1 != nil || err2 != nil || !same(l, want[0]) || !same(r, want[1]) {
			continue
		}
		state, err1 := strconv.ParseUint(fields[3], 16, 8)
		uid, err2 := strconv.Atoi(fields[7])
		inode, err3 := strconv.ParseUint(fields[9], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return socket{}, fmt.Errorf("%s: row %q: %w", table, sc.Text(), err)
		}
		return socket{state: uint8(state), uid: uid, inode: inode}, nil
	}
	if err := sc.Err(); err != nil {
		return socket{}, fmt.Errorf("read %s: %w", table, err)
	}
	return socket{}, errNotFound
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
