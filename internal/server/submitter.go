package server

import (
	"net"
	"net/http"
	"strings"
	"unicode"
)

// HeaderUser is the header in which a trainyard client names its user and host
// (user@host), for the job list's "who".
const HeaderUser = "X-Trainyard-User"

// maxSubmitter bounds the user and host a client names.
const maxSubmitter = 100

// submitter says who submits a request, as far as the server can tell: the user@host the
// trainyard client names in its header (every client holds the same token, so this is
// what the client says, not an identity), and the address the request came from. Ray's
// clients name nobody: their address alone.
func submitter(r *http.Request) string {
	claimed := strings.Map(func(c rune) rune {
		if unicode.IsPrint(c) && c != '<' && c != '>' {
			return c
		}
		return -1
	}, r.Header.Get(HeaderUser))
	if len(claimed) > maxSubmitter {
		claimed = claimed[:maxSubmitter]
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || host == "" {
		return claimed
	}
	if claimed == "" {
		return host
	}
	return claimed + " from " + host
}
