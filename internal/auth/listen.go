package auth

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// CheckListen returns a warning for the server to print when it would listen on addr
// ("host:port") without TLS and addr is not a loopback address (127.0.0.0/8, ::1 or
// "localhost"): the token would cross the network in clear text. It returns "" when
// there is nothing to warn about, and an error when addr is not host:port with a numeric
// port. A host name other than localhost is not looked up and counts as not loopback.
func CheckListen(addr string, tls bool) (warning string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("listen address %q is not host:port (such as 127.0.0.1:8265): %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("listen address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if tls || isLoopback(host) {
		return "", nil
	}
	where := addr
	if host == "" {
		where = addr + " (all interfaces)"
	}
	return fmt.Sprintf("listening on %s without TLS: the token travels in clear text; "+
		"use --tls-cert/--tls-key or a loopback address", where), nil
}

// isLoopback reports whether host, from a listen address, is a loopback address or
// "localhost".
func isLoopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
