package reporting

import (
	"bufio"
	"errors"
	"flag"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with what WriteTable prints")

// fakeHandler records the reports it gets. It answers with the metric "n" as the
// iteration and "ckpt" as the checkpoint when the report has one, and refuses a report
// with a metric "fail".
type fakeHandler struct {
	mu      sync.Mutex
	reports []Report
}

// Report records rep and answers as the type's comment says.
func (h *fakeHandler) Report(rep Report) (Reply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, rep)
	if _, ok := rep.Metrics["fail"]; ok {
		return Reply{}, errors.New("refused <by the fake>")
	}
	reply := Reply{Iteration: int(rep.Metrics["n"])}
	if rep.Checkpoint != "" {
		reply.Checkpoint = "ckpt"
	}
	return reply, nil
}

// got returns the reports received so far.
func (h *fakeHandler) got() []Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Report(nil), h.reports...)
}

// notes is a Notifier that records the notices.
type notes struct {
	mu   sync.Mutex
	list []string
}

// Notice records text.
func (n *notes) Notice(text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, text)
}

// take returns the notices so far and forgets them.
func (n *notes) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.list
	n.list = nil
	return out
}

// client is one connection to a report socket, as the helper holds it.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

// dial connects to the socket at path; the connection is closed when the test ends.
func dial(t *testing.T, path string) *client {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{conn: conn, r: bufio.NewReader(conn)}
}

// roundTrip sends one request line and returns the reply line without its newline.
func (c *client) roundTrip(line string) (string, error) {
	if err := c.conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.readLine()
}

// readLine reads one reply line and returns it without its newline.
func (c *client) readLine() (string, error) {
	reply, err := c.r.ReadString('\n')
	if err != nil {
		return reply, err
	}
	return strings.TrimSuffix(reply, "\n"), nil
}

// rootOf opens the run folder dir as a session takes it.
func rootOf(tb testing.TB, dir string) *os.Root {
	tb.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return root
}
