package tcpstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a TCPStore that torch clients connect to. Create it with Listen; it serves
// until Close.
type Server struct {
	ln     net.Listener
	log    *slog.Logger
	limits Limits
	admit  func(net.Conn) error
	// refused and full warn of refused clients, at most once per warnEvery each.
	refused, full *warner

	mu     sync.Mutex // guards ks, conns, closed
	ks     keyspace
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection's goroutines
}

// Options configure a Server. The zero value is usable.
type Options struct {
	// Logger receives refused requests and client errors; nil discards them.
	Logger *slog.Logger
	Limits Limits
	// Admit, when set, decides whether a new client may use the store: an error closes
	// the connection before it is read, and is logged, at most once per 10 s with the
	// count of the others (peercred.SameUser refuses other local users' clients). It runs
	// off the accept loop, for up to 16 clients at once.
	Admit func(net.Conn) error
}

// Listen starts a store listening on addr ("127.0.0.1:0" picks a free port; ":29500"
// listens on every address).
func Listen(addr string, opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("start the rendezvous store on %s: %w", addr, err)
	}
	s := &Server{ln: ln, log: opts.Logger, limits: opts.Limits.withDefaults(), admit: opts.Admit, conns: map[*conn]struct{}{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.refused, s.full = &warner{log: s.log}, &warner{log: s.log}
	s.ks = newKeyspace(&s.limits)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the store listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Port is the port the store listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Reset empties the store and closes every connection, so that the next attempt's ranks
// find none of the previous attempt's keys (torch 2.x's env:// clients use no prefix per
// attempt under an agent's store) and no client of it can change the new keys.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.close()
	}
	s.ks = newKeyspace(&s.limits)
}

// Len says how many keys the store holds.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ks.vals)
}

// Close stops listening, closes every connection and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// maxAdmitting bounds the connections being admitted at once: Admit runs off the accept
// loop, so that a slow check does not hold up the next client, but a flood of clients
// waits in the listener's backlog rather than in goroutines.
const maxAdmitting = 16

// accept accepts clients and hands each to admit.
func (s *Server) accept() {
	defer s.wg.Done()
	slots := make(chan struct{}, maxAdmitting)
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("rendezvous store: accept failed", "err", err)
			time.Sleep(50 * time.Millisecond) // out of descriptors, say: do not spin
			continue
		}
		slots <- struct{}{}
		s.wg.Add(1)
		go func() {
			defer func() { <-slots }()
			s.admitConn(nc)
		}()
	}
}

// admitConn asks Admit whether nc may use the store, then serves it. Refusals are
// warned of at most once per warnEvery, with the count of those not told: another local
// user flooding the store must not flood the job's console.
func (s *Server) admitConn(nc net.Conn) {
	defer s.wg.Done()
	if s.admit != nil {
		if err := s.admit(nc); err != nil {
			s.refused.warn("rendezvous store: connection refused", "peer", nc.RemoteAddr().String(), "err", err)
			nc.Close()
			return
		}
	}
	s.mu.Lock()
	if s.closed || len(s.conns) >= s.limits.MaxConns {
		s.mu.Unlock()
		if !s.closed {
			s.full.warn("rendezvous store: connection refused: too many clients (tcpstore.Limits.MaxConns)",
				"peer", nc.RemoteAddr().String(), "max", s.limits.MaxConns)
		}
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.wg.Add(2)
	go c.writeLoop()
	go c.serve()
}

// conn is one client connection. Its requests are read and handled one at a time by
// serve; replies, its own and the STOP_WAITING that another client's SET causes, are
// queued in order under the server's mutex and written by writeLoop.
type conn struct {
	s       *Server
	nc      net.Conn
	peer    string
	dialect dialect
	out     chan []byte
	done    chan struct{}
	once    sync.Once
	awaited []string     // keys its WAIT lacks; guarded by s.mu
	queued  atomic.Int64 // bytes of the replies in out
}

// outQueue and outBytes bound the replies waiting to be written to one client: their
// number, and their bytes beyond the first reply (which may be one large MULTI_GET).
const (
	outQueue = 256
	outBytes = 64 << 20
)

// writeTimeout bounds how long a client may leave a reply unread.
const writeTimeout = time.Minute

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{s: s, nc: nc, peer: nc.RemoteAddr().String(), out: make(chan []byte, outQueue), done: make(chan struct{})}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}

// send queues a reply; the caller holds s.mu, so replies keep the order they were made in.
func (c *conn) send(b []byte) {
	if q := c.queued.Add(int64(len(b))); q > int64(len(b)) && q > outBytes {
		c.s.log.Warn("rendezvous store: client disconnected: it does not read its replies", "peer", c.peer, "queued", q)
		c.close()
		return
	}
	select {
	case <-c.done:
	case c.out <- b:
	default:
		c.s.log.Warn("rendezvous store: client disconnected: it does not read its replies", "peer", c.peer)
		c.close()
	}
}

func (c *conn) awaits(key string) bool {
	for _, k := range c.awaited {
		if k == key {
			return true
		}
	}
	return false
}

func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case b := <-c.out:
			c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := c.nc.Write(b); err != nil {
				c.close()
				return
			}
			c.queued.Add(-int64(len(b)))
		}
	}
}

// serve reads and handles requests until the client leaves or breaks the protocol.
func (c *conn) serve() {
	defer c.s.wg.Done()
	defer c.forget()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	rd := reader{r: br, limits: &c.s.limits}
	d, err := sniff(br)
	c.dialect = d
	for err == nil {
		var b byte
		if b, err = br.ReadByte(); err != nil {
			break
		}
		var o op
		if o, err = decode(c.dialect, b); err == nil {
			err = c.handle(o, rd)
		}
	}
	select {
	case <-c.done: // closed by Reset, Close or a reply it did not read
	default:
		c.logEnd(err)
	}
}

// logEnd says why a client left: a refused request is a warning (it will fail the rank
// that sent it); a client that went away (a rank that exited or was killed) is not.
func (c *conn) logEnd(err error) {
	switch {
	case errors.Is(err, errProtocol):
		c.s.log.Warn("rendezvous store: client disconnected: request refused", "peer", c.peer,
			"client", c.dialect.String(), "reason", err.Error())
	case !errors.Is(err, io.EOF):
		c.s.log.Debug("rendezvous store: client gone", "peer", c.peer, "reason", err.Error())
	}
}

// forget closes the connection and drops what it waited for.
func (c *conn) forget() {
	c.close()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.ks.cancel(c)
	delete(c.s.conns, c)
}

// handle reads one request's arguments, then answers it under the server's mutex.
func (c *conn) handle(o op, rd reader) error {
	switch o {
	case opValidate:
		n, err := rd.u32()
		if err == nil && n != validationMagic {
			err = fmt.Errorf("%w: VALIDATE with %#x, not torch's magic number", errProtocol, n)
		}
		return err
	case opPing:
		n, err := rd.u32()
		if err != nil {
			return err
		}
		return c.locked(func(*keyspace) error { c.send(binary.LittleEndian.AppendUint32(nil, n)); return nil })
	case opSet, opAppend:
		key, val, err := keyValue(rd)
		if err != nil {
			return err
		}
		return c.locked(func(ks *keyspace) error {
			if o == opAppend {
				val = append(append([]byte{}, ks.vals[key]...), val...)
			}
			return ks.set(key, val)
		})
	case opCompareSet:
		return c.compareSet(rd)
	case opAdd:
		return c.add(rd)
	case opGet, opDelete:
		return c.keyQuery(o, rd)
	case opNumKeys:
		return c.locked(func(ks *keyspace) error { c.send(u64Bytes(uint64(len(ks.vals)))); return nil })
	case opCheck, opWait, opMultiGet:
		return c.keysQuery(o, rd)
	case opMultiSet:
		return c.multiSet(rd)
	case opCancelWait:
		return c.locked(func(ks *keyspace) error { ks.cancel(c); c.send([]byte{waitCanceled}); return nil })
	}
	return fmt.Errorf("%w: %s is not supported (torch 1.13's watch_key)", errProtocol, o)
}

// locked runs f on the keyspace under the server's mutex, unless the connection was closed
// meanwhile (by Reset: a request of the previous attempt never reaches the new keyspace).
func (c *conn) locked(f func(*keyspace) error) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	select {
	case <-c.done:
		return net.ErrClosed
	default:
	}
	return f(&c.s.ks)
}

func keyValue(rd reader) (string, []byte, error) {
	key, err := rd.key()
	if err != nil {
		return "", nil, err
	}
	val, err := rd.value()
	return key, val, err
}

func (c *conn) compareSet(rd reader) error {
	key, expected, err := keyValue(rd)
	if err != nil {
		return err
	}
	desired, err := rd.value()
	if err != nil {
		return err
	}
	return c.locked(func(ks *keyspace) error {
		v, err := ks.compareSet(key, expected, desired)
		if err == nil {
			c.send(appendString(nil, v))
		}
		return err
	})
}

func (c *conn) add(rd reader) error {
	key, err := rd.key()
	if err != nil {
		return err
	}
	delta, err := rd.u64()
	if err != nil {
		return err
	}
	return c.locked(func(ks *keyspace) error {
		n, err := ks.add(key, int64(delta))
		if err == nil {
			c.send(u64Bytes(uint64(n)))
		}
		return err
	})
}

func (c *conn) keyQuery(o op, rd reader) error {
	key, err := rd.key()
	if err != nil {
		return err
	}
	return c.locked(func(ks *keyspace) error {
		if o == opDelete {
			c.send(u64Bytes(uint64(ks.delete(key))))
			return nil
		}
		v, err := ks.get(key)
		if err == nil {
			c.send(appendString(nil, v))
		}
		return err
	})
}

func (c *conn) keysQuery(o op, rd reader) error {
	keys, err := rd.keys()
	if err != nil {
		return err
	}
	return c.locked(func(ks *keyspace) error {
		switch o {
		case opCheck:
			c.send([]byte{map[bool]byte{true: checkReady, false: checkNotReady}[ks.has(keys)]})
		case opWait:
			if ks.wait(c, keys) {
				c.send([]byte{stopWaiting})
			}
		case opMultiGet:
			var b []byte
			for _, k := range keys {
				v, err := ks.get(k)
				if err != nil {
					return err
				}
				b = appendString(b, v)
			}
			c.send(b)
		}
		return nil
	})
}

func (c *conn) multiSet(rd reader) error {
	n, err := rd.u64()
	if err != nil {
		return err
	}
	if n > uint64(c.s.limits.MaxKeysPerRequest) {
		return fmt.Errorf("%w: MULTI_SET of %d keys; the most is %d (tcpstore.Limits)", errProtocol, n, c.s.limits.MaxKeysPerRequest)
	}
	for range n {
		key, val, err := keyValue(rd)
		if err != nil {
			return err
		}
		if err := c.locked(func(ks *keyspace) error { return ks.set(key, val) }); err != nil {
			return err
		}
	}
	return nil
}
