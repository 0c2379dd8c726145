package peercred

import (
	"net"
	"testing"
)

// BenchmarkOwner times one owner lookup while the machine has 2,000 other connections
// open (a flood, or a busy server): sock_diag's exact lookup against a read of the whole
// socket tables, which the store used before.
//
//	go test -run '^$' -bench Owner ./internal/peercred
func BenchmarkOwner(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4096)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var conns []net.Conn
	for range 2000 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c, <-accepted)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	server := conns[len(conns)-1]
	l, r := server.RemoteAddr().(*net.TCPAddr).AddrPort(), server.LocalAddr().(*net.TCPAddr).AddrPort()
	for name, find := range map[string]func() (socket, error){
		"sock_diag": func() (socket, error) { return diagLookup(l, r) },
		"tables":    func() (socket, error) { return tableLookup(l, r) },
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if s, err := find(); err != nil || s.state != tcpEstablished {
					b.Fatal(s, err)
				}
			}
		})
	}
}
