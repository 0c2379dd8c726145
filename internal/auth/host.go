package auth

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// hostSet is the set of Host header values that Middleware lets through.
type hostSet struct {
	names   map[string]bool // normalized by normalizeHost
	anyIP   bool            // the server listens on all interfaces
	anyHost bool            // "*" was allowed
}

// newHostSet builds the allowed hosts of opts: the loopback names, the listen address and
// opts.AllowHosts.
func newHostSet(opts Options) *hostSet {
	s := &hostSet{names: map[string]bool{}}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		s.names[h] = true
	}
	if opts.ListenAddr != "" {
		host := opts.ListenAddr
		if h, _, err := net.SplitHostPort(opts.ListenAddr); err == nil {
			host = h
		}
		if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
			s.anyIP = true
		} else {
			s.names[normalizeName(host)] = true
		}
	}
	for _, h := range opts.AllowHosts {
		if h == "*" {
			s.anyHost = true
			continue
		}
		if name, ok := normalizeHost(h); ok {
			s.names[name] = true
		}
	}
	return s
}

// allows reports whether the Host header value h names this server.
func (s *hostSet) allows(h string) bool {
	if s.anyHost {
		return true
	}
	name, ok := normalizeHost(h)
	if !ok {
		return false
	}
	if s.names[name] {
		return true
	}
	_, err := netip.ParseAddr(name)
	return s.anyIP && err == nil
}

// refusal is the error message for a request whose Host is h.
func (s *hostSet) refusal(h string) string {
	if h == "" {
		return "the request has no Host header; send one that names the server, such as localhost"
	}
	name, ok := normalizeHost(h)
	if !ok {
		name = h
	}
	return fmt.Sprintf("Host %q is not allowed; the server answers only requests addressed to localhost, "+
		"127.0.0.1, [::1] or its listen address, to defend against DNS rebinding; to reach it by this name, "+
		"start the server with --allow-host %s", h, name)
}

// normalizeHost returns the host part of a Host header value ("name", "name:port",
// "[v6]", "[v6]:port", or a bare IPv6 address), lower-cased, without a trailing dot and
// with IP addresses in canonical form. It returns false for a malformed value.
func normalizeHost(h string) (string, bool) {
	host := h
	switch {
	case strings.HasPrefix(h, "["):
		end := strings.IndexByte(h, ']')
		if end < 0 || !validPort(h[end+1:]) {
			return "", false
		}
		host = h[1:end]
		if _, err := netip.ParseAddr(host); err != nil {
			return "", false
		}
	case strings.Count(h, ":") == 1:
		i := strings.IndexByte(h, ':')
		if !validPort(h[i:]) {
			return "", false
		}
		host = h[:i]
	}
	if host == "" || strings.ContainsAny(host, "/\\@ \t") {
		return "", false
	}
	return normalizeName(host), true
}

// validPort reports whether s is empty or a colon followed by digits only.
func validPort(s string) bool {
	if s == "" {
		return true
	}
	if s[0] != ':' {
		return false
	}
	for _, c := range []byte(s[1:]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// normalizeName lower-cases a host name and drops a trailing dot; an IP address becomes
// its canonical form, without a zone, IPv4-mapped IPv6 addresses as IPv4.
func normalizeName(host string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.WithZone("").Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
