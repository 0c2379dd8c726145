package tcpstore

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/peercred"
)

// The store as the launcher runs it (Admit: peercred.SameUser), against another local
// user: these tests need root, to run that user's client, and /usr/bin/python3 to be it.

const otherUID = 12345

// otherUser runs Python code as uid otherUID with args and waits for it.
func otherUser(t *testing.T, code string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 to play the other user's client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", append([]string{"-c", code}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other user's client: %v\n%s", err, out)
	}
}

// countingAdmit is peercred.SameUser, counting its answers.
type countingAdmit struct{ admitted, refused atomic.Int64 }

func (a *countingAdmit) admit(c net.Conn) error {
	err := peercred.SameUser(c)
	if err != nil {
		a.refused.Add(1)
	} else {
		a.admitted.Add(1)
	}
	return err
}

// await waits, generously, until the store has answered n clients.
func (a *countingAdmit) await(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); a.admitted.Load()+a.refused.Load() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the store answered %d clients of %d", a.admitted.Load()+a.refused.Load(), n)
		}
	}
}

// warnings counts the warnings logged through it.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		w.msgs = append(w.msgs, r.Message)
		w.mu.Unlock()
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// blindSets connects n times, sends a legacy SET of a key of its own and closes at once.
const blindSets = `import socket, struct, sys
for i in range(int(sys.argv[2])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    k, v = b"attacker/%d" % i, b"x"
    s.sendall(struct.pack("<BQ", 0, len(k)) + k + struct.pack("<Q", len(v)) + v)
    s.close()
`

// A client of another user that connects, sends a SET and closes at once is refused, even
// when the store runs as root: its socket's row, once closed, names uid 0.
func TestBlindSetsOfAnotherUser(t *testing.T) {
	var a countingAdmit
	s, err := Listen("127.0.0.1:0", Options{Admit: a.admit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 200
	otherUser(t, blindSets, strings.TrimPrefix(s.Addr().String(), "127.0.0.1:"), "200")
	a.await(t, n)
	if got := s.Len(); got != 0 || a.admitted.Load() != 0 {
		t.Errorf("the store holds %d keys and admitted %d of %d blind clients; want none", got, a.admitted.Load(), n)
	}
}

// floodAndHold opens n connections, then holds them until they are all closed by the
// server or a minute passes.
const floodAndHold = `import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]
for s in socks:
    s.settimeout(60)
    s.recv(1)
`

// Another user flooding the store with clients neither floods the job's log (one warning,
// then one per 10 s with the count of the others) nor stops its own clients.
func TestFloodOfAnotherUser(t *testing.T) {
	var a countingAdmit
	w := &warnings{}
	s, err := Listen("127.0.0.1:0", Options{Admit: a.admit, Logger: slog.New(w)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 300
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		otherUser(t, floodAndHold, strings.TrimPrefix(s.Addr().String(), "127.0.0.1:"), "300")
	}()
	c := dial(t, s, current)
	for i := range 20 {
		c.set("k", strings.Repeat("v", i))
		if got := c.get("k"); got != strings.Repeat("v", i) {
			t.Fatalf("the job's own client read %q", got)
		}
	}
	<-flooded
	a.await(t, n+1)
	if a.refused.Load() != n {
		t.Errorf("refused %d of the other user's %d clients", a.refused.Load(), n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) == 0 || len(w.msgs) > 2 {
		t.Errorf("%d warnings for %d refused clients; want one (or two, 10 s apart): %q", len(w.msgs), n, w.msgs)
	}
}
