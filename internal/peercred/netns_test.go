package peercred

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests below that run as another user need root, /usr/bin/python3 (a Python that
// another user may run) and, for a second local address, a network namespace of their
// own (unshare -n and ip, as root): a kubelet's KUBE-FIREWALL rule, on a machine where a
// test cluster ran, drops packets from other addresses to 127/8 in the machine's own
// namespace, which would hide the hole these tests look for.

const (
	python    = "/usr/bin/python3"
	otherUID  = 12345
	netnsEnv  = "PEERCRED_TEST_NETNS"
	localAddr = "192.0.2.10" // TEST-NET-1, put on lo of the test's own namespace
)

// needOtherUser skips unless the test can run a Python client as another user.
func needOtherUser(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to play the other user's client")
	}
}

// inNetns runs the calling test again in a network namespace of its own whose loopback
// also has localAddr, and reports its result; it returns true in that run, which is to do
// the test's work.
func inNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) != "" {
		return true
	}
	needOtherUser(t)
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s for a network namespace of the test's own", tool)
		}
	}
	script := `set -e; ip link set lo up; ip addr add ` + localAddr + `/32 dev lo; exec "$@"`
	cmd := exec.Command("unshare", "-n", "sh", "-c", script, "sh", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a network namespace of its own: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("skipped in its network namespace:\n%s", out)
	}
	t.Logf("in a network namespace of its own:\n%s", out)
	return false
}

// otherUsersClient runs a Python client as uid otherUID that binds to bind (an address
// of this machine), connects to addr, sends send and then holds the connection until the
// test ends (or closes it at once, with close).
func otherUsersClient(t *testing.T, bind, addr string, send []byte, close bool) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	code := `import socket, sys, time
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET)
s.bind((sys.argv[1], 0))
s.connect((sys.argv[2], int(sys.argv[3])))
s.sendall(bytes.fromhex(sys.argv[4]))
if sys.argv[5] == "hold":
    time.sleep(60)
`
	hold := "hold"
	if close {
		hold = "close"
	}
	cmd := exec.Command(python, "-c", code, bind, host, port, hexOf(send), hold)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	if close {
		if err := <-done; err != nil {
			t.Fatalf("the other user's client: %v\n%s", err, out)
		}
		done <- nil
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// Another local user's client that binds to the machine's own (non-loopback) address and
// connects to 127.0.0.1 is that user, and is refused: it is not taken for a client of
// another machine.
func TestAnotherUserFromALocalAddress(t *testing.T) {
	if !inNetns(t) {
		return
	}
	c := accept(t, "tcp", "127.0.0.1:0", func(a string) {
		otherUsersClient(t, localAddr, a, []byte("x"), false)
	})
	if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != localAddr {
		t.Fatalf("the client came from %s; want %s", got, localAddr)
	}
	uid, err := Owner(c)
	if err != nil || uid != otherUID {
		t.Fatalf("owner %d, %v; want %d", uid, err, otherUID)
	}
	if err := SameUser(c); err == nil || !strings.Contains(err.Error(), "uid 12345") {
		t.Errorf("SameUser: %v; want it to refuse uid 12345", err)
	}
}

// A client that closed its end is refused whoever it was: the kernel's row for it (TIME_WAIT,
// FIN_WAIT) names uid 0, not its owner, or is gone.
func TestClosedClientRefused(t *testing.T) {
	c, client := ownClient(t)
	client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := SameUser(c)
		if err != nil {
			if !strings.Contains(err.Error(), "cannot be told") {
				t.Errorf("SameUser: %v; want it to say the owner cannot be told", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed client is still admitted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownClient connects to a listener on 127.0.0.1 and returns both ends: the server's, then
// the client's.
func ownClient(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	clients := make(chan net.Conn, 1)
	c := accept(t, "tcp", "127.0.0.1:0", func(a string) {
		client, err := net.Dial("tcp", a)
		if err != nil {
			t.Error(err)
		}
		clients <- client
	})
	client := <-clients
	if client == nil {
		t.FailNow()
	}
	return c, client
}

// fakeConn is a connection with the given addresses, for the decisions on sockets that
// the kernel does not know.
type fakeConn struct {
	net.Conn
	local, remote net.Addr
}

func (c fakeConn) LocalAddr() net.Addr  { return c.local }
func (c fakeConn) RemoteAddr() net.Addr { return c.remote }

// A client whose socket is not in this machine's tables is on another machine when its
// address is not one of this machine's, and is refused when it is.
func TestSocketNotFound(t *testing.T) {
	old := lookup
	t.Cleanup(func() { lookup = old })
	lookup = func(netip.AddrPort, netip.AddrPort) (socket, error) { return socket{}, errNotFound }
	ours := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 29500}
	for remote, want := range map[string]error{
		"198.51.100.7": ErrRemote, // TEST-NET-2: no address of this machine
		"127.0.0.1":    nil,
		"127.0.0.2":    nil,
		"::1":          nil,
	} {
		_, err := Owner(fakeConn{local: ours, remote: &net.TCPAddr{IP: net.ParseIP(remote), Port: 40000}})
		if want == ErrRemote {
			if !errors.Is(err, ErrRemote) {
				t.Errorf("%s: %v; want ErrRemote", remote, err)
			}
			if err := SameUser(fakeConn{local: ours, remote: &net.TCPAddr{IP: net.ParseIP(remote), Port: 40000}}); err != nil {
				t.Errorf("%s: SameUser %v; want it admitted (its owner cannot be known)", remote, err)
			}
			continue
		}
		if err == nil || errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "not in this machine's socket tables") {
			t.Errorf("%s: %v; want a refusal: a local address whose socket is not found", remote, err)
		}
	}
}

// sock_diag and the kernel's tables agree on a socket.
func TestDiagAgreesWithTables(t *testing.T) {
	c, client := ownClient(t)
	defer client.Close()
	l, r := c.RemoteAddr().(*net.TCPAddr).AddrPort(), c.LocalAddr().(*net.TCPAddr).AddrPort()
	d, err := diagLookup(l, r)
	if errors.Is(err, errNoDiag) {
		t.Skipf("this kernel has no sock_diag: %v", err)
	}
	tb, err2 := tableLookup(l, r)
	if err != nil || err2 != nil || d != tb || d.state != tcpEstablished || d.inode == 0 || d.uid != os.Geteuid() {
		t.Errorf("sock_diag %+v, %v; tables %+v, %v; want the same connected socket of uid %d", d, err, tb, err2, os.Geteuid())
	}
	if _, err := diagLookup(netip.MustParseAddrPort("127.0.0.1:1"), r); !errors.Is(err, errNotFound) {
		t.Errorf("no such socket: %v; want errNotFound", err)
	}
}
