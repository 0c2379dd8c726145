package auth

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckListen(t *testing.T) {
	cases := map[string]struct {
		addr        string
		tls         bool
		wantWarning string
		wantErr     string
	}{
		"loopback":            {addr: "127.0.0.1:8265"},
		"other loopback":      {addr: "127.0.0.2:8265"},
		"IPv6 loopback":       {addr: "[::1]:8265"},
		"IPv4-mapped":         {addr: "[::ffff:127.0.0.1]:8265"},
		"localhost":           {addr: "localhost:8265"},
		"port 0":              {addr: "127.0.0.1:0"},
		"all interfaces, TLS": {addr: "0.0.0.0:8265", tls: true},
		"all interfaces": {addr: "0.0.0.0:8265",
			wantWarning: "listening on 0.0.0.0:8265 without TLS: the token travels in clear text; use --tls-cert/--tls-key or a loopback address"},
		"empty host": {addr: ":8265",
			wantWarning: "listening on :8265 (all interfaces) without TLS: the token travels in clear text; use --tls-cert/--tls-key or a loopback address"},
		"IPv6 all": {addr: "[::]:8265",
			wantWarning: "listening on [::]:8265 without TLS: the token travels in clear text; use --tls-cert/--tls-key or a loopback address"},
		"LAN address": {addr: "192.168.1.5:8265",
			wantWarning: "listening on 192.168.1.5:8265 without TLS: the token travels in clear text; use --tls-cert/--tls-key or a loopback address"},
		"host name": {addr: "gpu-box:8265",
			wantWarning: "listening on gpu-box:8265 without TLS: the token travels in clear text; use --tls-cert/--tls-key or a loopback address"},
		"no port":          {addr: "127.0.0.1", wantErr: `listen address "127.0.0.1" is not host:port (such as 127.0.0.1:8265): address 127.0.0.1: missing port in address`},
		"port only":        {addr: "8265", wantErr: `listen address "8265" is not host:port (such as 127.0.0.1:8265): address 8265: missing port in address`},
		"bad port":         {addr: "127.0.0.1:http", wantErr: `listen address "127.0.0.1:http": port "http" is not a number from 0 to 65535`},
		"port too big":     {addr: "127.0.0.1:70000", wantErr: `listen address "127.0.0.1:70000": port "70000" is not a number from 0 to 65535`},
		"IPv6 no brackets": {addr: "::1:8265", wantErr: `listen address "::1:8265" is not host:port (such as 127.0.0.1:8265): address ::1:8265: too many colons in address`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warning, err := CheckListen(tc.addr, tc.tls)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff([]string{tc.wantWarning, tc.wantErr}, []string{warning, gotErr}); diff != "" {
				t.Errorf("CheckListen(%q, %v) [warning, error] (-want +got):\n%s", tc.addr, tc.tls, diff)
			}
		})
	}
}
