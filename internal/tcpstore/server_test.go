package tcpstore

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func listen(t *testing.T, limits Limits) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0", Options{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var dialects = map[string]dialect{"torch 1.13-2.1": legacy, "torch 2.2+": current}

func TestKeysAndValues(t *testing.T) {
	for name, d := range dialects {
		t.Run(name, func(t *testing.T) {
			c := dial(t, listen(t, Limits{}), d)
			c.set("a", "1")
			if got := c.get("a"); got != "1" {
				t.Errorf("get(a) = %q, want 1", got)
			}
			if got := c.add("n", 5); got != 5 {
				t.Errorf("add(n, 5) on a missing key = %d, want 5", got)
			}
			if got := c.add("n", -2); got != 3 {
				t.Errorf("add(n, -2) = %d, want 3", got)
			}
			if got := c.get("n"); got != "3" {
				t.Errorf("get(n) = %q, want the decimal 3", got)
			}
			if !c.check("a", "n") || c.check("a", "missing") {
				t.Error("check: want ready for set keys only")
			}
			if got := c.numKeys(); got != 2 {
				t.Errorf("numKeys = %d, want 2", got)
			}
			if got := c.deleteKey("a"); got != 1 {
				t.Errorf("delete(a) = %d, want 1", got)
			}
			if got := c.deleteKey("a"); got != 0 {
				t.Errorf("delete(a) again = %d, want 0", got)
			}
		})
	}
}

// TestCompareSet follows torch's compareSetHandler, including its reply for a missing
// key with a non-empty expected value (the expected value, with nothing set).
func TestCompareSet(t *testing.T) {
	cases := map[string]struct {
		before            *string
		expected, desired string
		want              string
		after             *string
	}{
		"missing, expected empty: set":   {nil, "", "new", "new", ptr("new")},
		"missing, expected given: unset": {nil, "old", "new", "old", nil},
		"matches: replaced":              {ptr("old"), "old", "new", "new", ptr("new")},
		"differs: kept":                  {ptr("other"), "old", "new", "other", ptr("other")},
		"empty value matches empty":      {ptr(""), "", "new", "new", ptr("new")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, listen(t, Limits{}), current)
			if tc.before != nil {
				c.set("k", *tc.before)
			}
			if got := c.compareSet("k", tc.expected, tc.desired); got != tc.want {
				t.Errorf("compare_set replied %q, want %q", got, tc.want)
			}
			if has := c.check("k"); has != (tc.after != nil) {
				t.Fatalf("key set afterwards: %v, want %v", has, tc.after != nil)
			}
			if tc.after != nil {
				if got := c.get("k"); got != *tc.after {
					t.Errorf("value afterwards %q, want %q", got, *tc.after)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestWaitEndsWhenEveryKeyIsSet: a WAIT for two keys gets no reply after the first is set
// (the 2.x client's CANCEL_WAIT then gets WAIT_CANCELED first), and STOP_WAITING once both are.
func TestWaitEndsWhenEveryKeyIsSet(t *testing.T) {
	s := listen(t, Limits{})
	waiter, setter := dial(t, s, current), dial(t, s, legacy)
	waiter.startWait("k1", "k2")
	setter.set("k1", "x")
	setter.get("k1") // a round trip: the SET was handled
	waiter.write(waiter.query(opCancelWait))
	if b := waiter.readByte(); b != waitCanceled {
		t.Fatalf("after one of two keys, CANCEL_WAIT got %d first, want WAIT_CANCELED", b)
	}

	waiter.startWait("k1", "k2")
	setter.set("k2", "y")
	if b := waiter.readByte(); b != stopWaiting {
		t.Fatalf("WAIT replied %d once both keys were set, want STOP_WAITING", b)
	}
}

// TestCancelAfterStopWaiting: a CANCEL_WAIT that crosses STOP_WAITING is answered after it,
// the order torch 2.x's doWait reads them in.
func TestCancelAfterStopWaiting(t *testing.T) {
	s := listen(t, Limits{})
	waiter, setter := dial(t, s, current), dial(t, s, current)
	waiter.startWait("k")
	setter.set("k", "v")
	setter.get("k")
	waiter.write(waiter.query(opCancelWait))
	if a, b := waiter.readByte(), waiter.readByte(); a != stopWaiting || b != waitCanceled {
		t.Fatalf("replies %d, %d; want STOP_WAITING then WAIT_CANCELED", a, b)
	}
}

func TestWaitForSetKeysAnswersAtOnce(t *testing.T) {
	c := dial(t, listen(t, Limits{}), legacy)
	c.set("a", "1")
	c.wait("a")
	c.wait() // no keys at all
}

func TestAppendMultiGetMultiSetPing(t *testing.T) {
	for name, d := range dialects {
		t.Run(name, func(t *testing.T) {
			c := dial(t, listen(t, Limits{}), d)
			c.write(c.query(opAppend), str("log"), str("ab"))
			c.write(c.query(opAppend), str("log"), str("cd"))
			c.write(c.query(opMultiSet), u64Bytes(2), str("x"), str("1"), str("y"), str("2"))
			c.write(c.query(opMultiGet), strs("log", "x", "y"))
			got := []string{c.readString(), c.readString(), c.readString()}
			if strings.Join(got, ",") != "abcd,1,2" {
				t.Errorf("multi_get = %q, want [abcd 1 2]", got)
			}
			if d == current {
				c.write(c.query(opPing), []byte{1, 2, 3, 4})
				if a, b, x, y := c.readByte(), c.readByte(), c.readByte(), c.readByte(); a != 1 || b != 2 || x != 3 || y != 4 {
					t.Errorf("ping echoed %d %d %d %d, want 1 2 3 4", a, b, x, y)
				}
			}
		})
	}
}

// TestRefused: a request the server cannot honour closes that connection (torch's own
// server does the same), and the store goes on serving the others.
func TestRefused(t *testing.T) {
	limits := Limits{MaxKeyLen: 4, MaxValueLen: 8, MaxKeysPerRequest: 2, MaxKeys: 2, MaxBytes: 15}
	cases := map[string]struct {
		d      dialect
		refuse func(c *client)
	}{
		"key too long":      {legacy, func(c *client) { c.set("12345", "v") }},
		"value too long":    {legacy, func(c *client) { c.set("k", "123456789") }},
		"too many keys":     {legacy, func(c *client) { c.set("a", "1"); c.set("b", "2"); c.set("c", "3") }},
		"too many bytes":    {current, func(c *client) { c.set("a", "12345678"); c.set("b", "12345678") }},
		"wait for 3 keys":   {current, func(c *client) { c.startWait("a", "b", "c") }},
		"get of a missing":  {legacy, func(c *client) { c.write(c.query(opGet), str("none")) }},
		"add to a non-int":  {current, func(c *client) { c.set("a", "x"); c.write(c.query(opAdd), str("a"), u64Bytes(1)) }},
		"unknown query":     {current, func(c *client) { c.write([]byte{99}) }},
		"watch_key (1.13)":  {legacy, func(c *client) { c.write(c.query(opWatchKey), str("a")) }},
		"bad validate":      {current, func(c *client) { c.write(c.query(opValidate), []byte{1, 2, 3, 4}) }},
		"multi_set too big": {legacy, func(c *client) { c.write(c.query(opMultiSet), u64Bytes(3)) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := listen(t, limits)
			c := dial(t, s, tc.d)
			tc.refuse(c)
			if !c.closed() {
				t.Fatal("the connection is still open after a refused request")
			}
			other := dial(t, s, tc.d)
			if other.check("none") {
				t.Error("another client then found a key that was never set")
			}
		})
	}
}

func TestTooManyConnections(t *testing.T) {
	s := listen(t, Limits{MaxConns: 1})
	first := dial(t, s, current)
	first.set("k", "v")
	first.get("k") // accepted and registered
	if !dial(t, s, current).closed() {
		t.Fatal("a second connection past MaxConns was kept open")
	}
	if got := first.get("k"); got != "v" {
		t.Errorf("the first client then read %q, want v", got)
	}
}

// TestReset: the next attempt finds no key of the previous one, and the previous one's
// connections are closed.
func TestReset(t *testing.T) {
	s := listen(t, Limits{})
	old := dial(t, s, legacy)
	old.set("k", "v")
	old.get("k")
	s.Reset()
	if !old.closed() {
		t.Fatal("a connection of before the reset is still open")
	}
	c := dial(t, s, current)
	if c.check("k") || c.numKeys() != 0 {
		t.Fatal("keys survived the reset")
	}
	c.set("k", "new")
	if got := c.get("k"); got != "new" {
		t.Errorf("get after reset = %q, want new", got)
	}
}

// TestLegacyFirstRequestIsSet: a 1.13 client whose first request is a SET (query 0, like
// 2.2's VALIDATE) is told apart from a 2.2 client by what follows.
func TestLegacyFirstRequestIsSet(t *testing.T) {
	s := listen(t, Limits{})
	c := dial(t, s, legacy)
	c.set("first", "v")
	if got := c.get("first"); got != "v" {
		t.Errorf("get = %q, want v", got)
	}
}

// TestUnreadRepliesBounded: a client that asks and never reads is disconnected once its
// unread replies pass the bound, rather than making the server hold them all.
func TestUnreadRepliesBounded(t *testing.T) {
	s := listen(t, Limits{})
	c := dial(t, s, legacy)
	big := strings.Repeat("x", 8<<20)
	c.set("big", big)
	// The server has admitted the client (off its accept loop) and serves it.
	c.get("big")
	const gets = 20 // 160 MiB of replies
	for range gets {
		c.write(c.query(opGet), str("big"))
	}
	for deadline := time.Now().Add(30 * time.Second); s.clients() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server still holds the client's replies after 30 s")
		}
	}
	// The server closed the connection: a FIN, or a reset when it had not read all the
	// client's requests by then (the kernel then drops what the client had yet to read).
	n, err := io.Copy(io.Discard, c.r)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the replies: %v", err)
	}
	if n >= gets*int64(len(big)) {
		t.Fatalf("read %d bytes: every reply was kept for a client that did not read", n)
	}
}

func (s *Server) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// A client that Admit refuses is disconnected before the store reads a byte of it; the
// store goes on serving the others.
func TestAdmitRefuses(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	s, err := Listen("127.0.0.1:0", Options{Admit: func(net.Conn) error {
		if refuse.Load() {
			return errors.New("not this job's user")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a refused client read %v; want EOF (closed)", err)
	}
	refuse.Store(false)
	c := dial(t, s, current)
	c.set("a", "1")
	if got := c.get("a"); got != "1" {
		t.Errorf("an admitted client: get(a) = %q", got)
	}
}
