package tcpstore

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// client is a TCPStore client written from torch's TCPStore.cpp (v1.13's TCPClient and
// v2.x's SendBuffer): the requests it sends are the bytes torch's client sends.
type client struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
	d  dialect
}

// dial connects as a client of dialect d; a 2.2+ client first sends VALIDATE.
func dial(t *testing.T, s *Server, d dialect) *client {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(time.Minute)) // generous: a broken server fails, not hangs
	c := &client{t: t, nc: nc, r: bufio.NewReader(nc), d: d}
	if d == current {
		c.write(c.query(opValidate), binary.LittleEndian.AppendUint32(nil, validationMagic))
	}
	return c
}

// query is o's type byte in the client's dialect.
func (c *client) query(o op) []byte {
	table := currentOps
	if c.d == legacy {
		table = legacyOps
	}
	for i, x := range table {
		if x == o {
			return []byte{byte(i)}
		}
	}
	c.t.Fatalf("%s has no %s", c.d, o)
	return nil
}

func (c *client) write(parts ...[]byte) {
	c.t.Helper()
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func str(s string) []byte { return appendString(nil, []byte(s)) }

func strs(keys ...string) []byte {
	b := u64Bytes(uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, []byte(k))
	}
	return b
}

func (c *client) readByte() byte {
	c.t.Helper()
	b, err := c.r.ReadByte()
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

func (c *client) readU64() uint64 {
	c.t.Helper()
	var b [8]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		c.t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (c *client) readString() string {
	c.t.Helper()
	b := make([]byte, c.readU64())
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

// closed says whether the server closed the connection (its answer to a refused request).
func (c *client) closed() bool {
	_, err := c.r.ReadByte()
	return err != nil
}

func (c *client) set(k, v string) { c.write(c.query(opSet), str(k), str(v)) }

// get is torch's get: a wait for the key, then GET.
func (c *client) get(k string) string {
	c.t.Helper()
	c.wait(k)
	c.write(c.query(opGet), str(k))
	return c.readString()
}

func (c *client) add(k string, n int64) int64 {
	c.write(c.query(opAdd), str(k), u64Bytes(uint64(n)))
	return int64(c.readU64())
}

func (c *client) compareSet(k, expected, desired string) string {
	c.write(c.query(opCompareSet), str(k), str(expected), str(desired))
	return c.readString()
}

func (c *client) check(keys ...string) bool {
	c.write(c.query(opCheck), strs(keys...))
	return c.readByte() == checkReady
}

func (c *client) wait(keys ...string) {
	c.t.Helper()
	c.startWait(keys...)
	if b := c.readByte(); b != stopWaiting {
		c.t.Fatalf("WAIT replied %d, want STOP_WAITING", b)
	}
}

func (c *client) startWait(keys ...string) { c.write(c.query(opWait), strs(keys...)) }

func (c *client) numKeys() int64 {
	c.write(c.query(opNumKeys))
	return int64(c.readU64())
}

func (c *client) deleteKey(k string) int64 {
	c.write(c.query(opDelete), str(k))
	return int64(c.readU64())
}
