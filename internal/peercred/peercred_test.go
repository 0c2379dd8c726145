package peercred

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// accept listens on addr, runs connect with the listener's address and returns the
// connection it accepted.
func accept(t *testing.T, network, addr string, connect func(string)) net.Conn {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s listener on %s: %v", network, addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go connect(ln.Addr().String())
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A client of this process's own user is that user, on IPv4 and IPv6 loopback.
func TestOwnClient(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		var client net.Conn
		c := accept(t, "tcp", addr, func(a string) {
			client, _ = net.Dial("tcp", a)
		})
		defer func() {
			if client != nil {
				client.Close()
			}
		}()
		uid, err := Owner(c)
		if err != nil || uid != os.Geteuid() {
			t.Errorf("%s: owner %d, %v; want %d", addr, uid, err, os.Geteuid())
		}
		if err := SameUser(c); err != nil {
			t.Errorf("%s: SameUser: %v", addr, err)
		}
	}
}

// A client run as another user is told apart and refused by SameUser.
func TestAnotherUsersClient(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	const python = "/usr/bin/python3" // a system Python another user may run
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to play the other user's client")
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	c := accept(t, "tcp", "127.0.0.1:0", func(a string) {
		host, port, _ := net.SplitHostPort(a)
		cmd := exec.Command(python, "-c", "import socket, sys, time; s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); time.sleep(30)", host, port)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 12345, Gid: 12345}}
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		<-done
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	uid, err := Owner(c)
	if err != nil || uid != 12345 {
		t.Fatalf("owner %d, %v; want 12345", uid, err)
	}
	err = SameUser(c)
	if err == nil || !strings.Contains(err.Error(), "uid "+strconv.Itoa(12345)) {
		t.Errorf("SameUser: %v; want it to name uid 12345", err)
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000000000000000000001000000:0050": "[::1]:80",
		"0000000000000000FFFF00000100007F:0016": "[::ffff:127.0.0.1]:22",
	} {
		got, err := parseAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("parseAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "zz00007F:0050", "0100007F:zz", "01:0050"} {
		if _, err := parseAddr(bad); err == nil {
			t.Errorf("parseAddr(%q): no error", bad)
		}
	}
}
