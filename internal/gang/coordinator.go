package gang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the Coordinator's and the Member's waits.
const (
	DefaultJoinWait    = 5 * time.Minute
	DefaultStopWait    = 45 * time.Second
	DefaultConnectWait = 5 * time.Minute
)

const (
	// handshakeTimeout bounds a connection's challenge and hello.
	handshakeTimeout = 10 * time.Second
	// maxHandshakes bounds the connections in their handshake at once; more are closed.
	maxHandshakes = 64
	// byeWait bounds the wait for members to hang up after finish.
	byeWait = 5 * time.Second
	// firstNotice is how long the coordinator waits quietly for members before it says
	// who is missing; noticeEvery how often it says it again.
	firstNotice = 2 * time.Second
	noticeEvery = 30 * time.Second
)

// State is what the coordinator is doing.
type State string

// The coordinator's states.
const (
	// Waiting for every worker before the first attempt.
	Waiting State = "waiting"
	// Running an attempt.
	Running State = "running"
	// Restarting: stopping an attempt, or waiting for the next one's workers.
	Restarting State = "restarting"
	// Finished: the gang succeeded or failed.
	Finished State = "finished"
)

// Status is where the gang is, for worker 0's progress.
type Status struct {
	State State
	// Attempt is the current (or last) attempt.
	Attempt int
	// Restarts and Disruptions are the run's restarts so far: those before this
	// coordinator started (Coordinator.Restarts, .Disruptions) and its own.
	Restarts, Disruptions int
	// InPlace is how many restarts this coordinator made, disruptions included.
	InPlace int
	// LastRestart says why it last restarted the gang: "attempt 3 restarted in place
	// after rank 5 (worker 2, pid 4242) exited with code 1", "attempt 4 grew in place:
	// resized from 2 to 3 workers: worker 2 readmitted (room found)".
	LastRestart string
	// Missing are the worker indices it waits for, while it waits (and those readmitted
	// that are not connected yet).
	Missing []int
	// Dropped are the worker indices the gang goes on without (Drop), in order, and
	// Resized says why it last did: "resized from 3 to 2 workers: worker 2 dropped (node
	// b lost)".
	Dropped []int
	Resized string
	// Joining are the worker indices readmitted (Readmit) that wait for the running
	// attempt to end before they join the gang, in order.
	Joining []int
	// Why, while it restarts, says why: "attempt 2 failed: rank 1 (worker 1, pid 4242)
	// exited with code 1"; Growing, that the restart is a grow, not a failure.
	Why     string
	Growing bool
}

// Result is how the gang ended.
type Result struct {
	Outcome Outcome // Succeeded or Failed
	Reason  string
	// Final, for a failed gang, is FinalRestarts or FinalDisruptions when no restart may
	// follow; "" when the failure is one whoever made the pods may restart (a worker
	// that never connected).
	Final string
	Status
}

// Coordinator runs a gang's attempts on its members (see the package doc). Set its
// fields, then call Run once; Status may be called at any time.
type Coordinator struct {
	// Workers is the gang's size: one member per worker index 0..Workers-1.
	Workers int
	// FirstAttempt is the number of the first attempt it starts (1-based; 0 means 1).
	FirstAttempt int
	// MaxRestarts is the job's maxRestarts, MaxDisruptions its maxDisruptions.
	MaxRestarts, MaxDisruptions int
	// Restarts and Disruptions are the run's restarts before this coordinator (all, and
	// those caused by disruptions, which do not count against MaxRestarts).
	Restarts, Disruptions int
	// Secret, when set, authenticates every message.
	Secret []byte
	// Dropped are workers the gang went on without before this coordinator (Drop, on
	// worker 0's pod before it was replaced): it neither waits for them nor takes them.
	Dropped []int
	// JoinWait bounds the wait for every worker before the first attempt (default
	// DefaultJoinWait), ReturnWait the wait for a lost worker to come back (default
	// JoinWait), StopWait the wait for members to confirm an attempt stopped (default
	// DefaultStopWait).
	JoinWait, ReturnWait, StopWait time.Duration
	// Prepare, when set, is called before each attempt starts, with no member running
	// anything; its error finishes the gang failed.
	Prepare func(ctx context.Context, attempt int) error
	// Stopping, when set, is called as the coordinator begins to stop an attempt, before
	// it tells any member to (worker 0 closes the rendezvous store's connections there, so
	// that ranks blocked in the store fail at once rather than at the grace period's end).
	Stopping func(attempt int)
	// GrowWhen, when set, is called once every worker readmitted while an attempt runs
	// (Readmit, at readmitted) is connected; the gang grows (the attempt stops and the next
	// starts with them) when the channel it returns is closed or receives. Worker 0 says:
	// at the next committed checkpoint, or the job's resize interval after the readmit.
	// Nil: at once.
	GrowWhen func(attempt int, readmitted time.Time) <-chan struct{}
	// Notify, when set, gets notices for people (the pod log).
	Notify func(string)
	// Logger gets diagnostics; nil: none.
	Logger *slog.Logger

	mu     sync.Mutex
	status Status
	sess   *session // the Run under way, for Drop
}

// Status returns where the gang is now.
func (c *Coordinator) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Missing = slices.Clone(s.Missing)
	s.Dropped = slices.Clone(s.Dropped)
	s.Joining = slices.Clone(s.Joining)
	return s
}

// Run accepts members on ln and runs the gang's attempts until it finishes, or ctx ends
// (then it returns ctx's error, and members find the coordinator gone). It closes ln.
func (c *Coordinator) Run(ctx context.Context, ln net.Listener) (Result, error) {
	s := c.newSession()
	s.wg.Go(func() { s.accept(ln) })
	defer s.shutdown(ln)
	return s.run(ctx)
}

// member is one member's connection, welcomed.
type member struct {
	*link
	worker           int
	pod, incarnation string
	ended            bool // it reported the current attempt's end
	stopped          bool // it confirmed the current stop
}

func (m *member) String() string {
	if m.pod == "" {
		return "worker " + strconv.Itoa(m.worker)
	}
	return fmt.Sprintf("worker %d (pod %s)", m.worker, m.pod)
}

// event is what a connection's goroutine hands the coordinator's loop.
type event struct {
	m      *member
	joined bool        // m finished its handshake
	msg    message     // else m sent msg,
	err    error       // or its connection ended
	req    *membership // or, with no m, Drop or Readmit was called
}

// session is one Run.
type session struct {
	c       *Coordinator
	log     *slog.Logger
	events  chan event
	quit    chan struct{}
	wg      sync.WaitGroup
	members map[int]*member
	dropped map[int]bool // worker indices the gang goes on without (Drop)
	// joining are the worker indices readmitted while an attempt runs (Readmit): they
	// join at the next; readmitted is when, and growWhy says why.
	joining    map[int]bool
	readmitted time.Time
	growWhy    string
	st         Status

	mu   sync.Mutex
	open map[net.Conn]bool // every connection, to close them at the end
}

func (c *Coordinator) newSession() *session {
	if c.FirstAttempt < 1 {
		c.FirstAttempt = 1
	}
	if c.JoinWait <= 0 {
		c.JoinWait = DefaultJoinWait
	}
	if c.ReturnWait <= 0 {
		c.ReturnWait = c.JoinWait
	}
	if c.StopWait <= 0 {
		c.StopWait = DefaultStopWait
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &session{c: c, log: log, events: make(chan event), quit: make(chan struct{}),
		members: map[int]*member{}, dropped: map[int]bool{}, joining: map[int]bool{}, open: map[net.Conn]bool{},
		st: Status{State: Waiting, Attempt: c.FirstAttempt, Restarts: c.Restarts, Disruptions: c.Disruptions}}
	for _, w := range c.Dropped {
		if w > 0 && w < c.Workers {
			s.dropped[w] = true
		}
	}
	s.st.Dropped = slices.Sorted(maps.Keys(s.dropped))
	c.mu.Lock()
	c.sess, c.status = s, s.st
	c.mu.Unlock()
	return s
}

// publish makes s.st what Status returns.
func (s *session) publish(state State) {
	s.st.State = state
	s.st.Missing = s.missing()
	for _, w := range s.joiningList() {
		if s.members[w] == nil {
			s.st.Missing = append(s.st.Missing, w) // waited for too, to join
		}
	}
	slices.Sort(s.st.Missing)
	s.st.Dropped = slices.Sorted(maps.Keys(s.dropped))
	s.st.Joining = s.joiningList()
	s.c.mu.Lock()
	s.c.status = s.st
	s.c.mu.Unlock()
}

func (s *session) notice(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.Info(msg)
	if s.c.Notify != nil {
		s.c.Notify(msg)
	}
}

// accept takes connections until ln is closed, and hands each to a handshake.
func (s *session) accept(ln net.Listener) {
	busy := make(chan struct{}, maxHandshakes)
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
			default:
				s.log.Warn("gang: accept", "err", err)
			}
			return
		}
		select {
		case busy <- struct{}{}:
		default:
			s.log.Warn("gang: too many connections in their handshake; closing one", "peer", nc.RemoteAddr())
			_ = nc.Close()
			continue
		}
		if !s.track(nc) {
			<-busy
			return
		}
		s.wg.Go(func() {
			m := s.handshake(nc)
			<-busy
			if m != nil {
				s.read(m)
			}
		})
	}
}

// track records an open connection; false when the session is over (nc is closed).
func (s *session) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		_ = nc.Close()
		return false
	}
	s.open[nc] = true
	return true
}

func (s *session) untrack(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open != nil {
		delete(s.open, nc)
	}
	_ = nc.Close()
}

// shutdown closes the listener and every connection and waits for their goroutines.
func (s *session) shutdown(ln net.Listener) {
	close(s.quit)
	_ = ln.Close()
	s.mu.Lock()
	for nc := range s.open {
		_ = nc.Close()
	}
	s.open = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// handshake challenges a new connection and checks its hello; it returns the member, or
// nil after refusing or losing it.
func (s *session) handshake(nc net.Conn) *member {
	setKeepAlive(nc)
	l := newLink(nc)
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	cn := nonce()
	if err := l.send(message{Type: typeChallenge, Nonce: cn}); err != nil {
		s.untrack(nc)
		return nil
	}
	env, err := l.readRaw()
	if errors.Is(err, errProtocol) {
		s.refuse(l, err.Error())
		return nil
	}
	if err != nil {
		s.log.Warn("gang: a connection sent no hello", "peer", nc.RemoteAddr(), "err", err)
		s.untrack(nc)
		return nil
	}
	var claimed message // unverified: only its nonce is used, to derive the key that verifies it
	_ = json.Unmarshal(env.Msg, &claimed)
	l.key = linkKey(s.c.Secret, cn, claimed.Nonce)
	hello, err := l.open(env)
	switch {
	case err != nil:
		s.refuse(l, err.Error())
		return nil
	case hello.Type != typeHello:
		s.refuse(l, fmt.Sprintf("the first message must be %s, not %q", typeHello, hello.Type))
		return nil
	case hello.Worker < 0 || hello.Worker >= s.c.Workers:
		s.refuse(l, fmt.Sprintf("worker %d is not one of this gang's workers 0 to %d", hello.Worker, s.c.Workers-1))
		return nil
	case s.c.wasDropped(hello.Worker):
		s.refuse(l, droppedText(hello.Worker))
		return nil
	}
	_ = nc.SetDeadline(time.Time{})
	m := &member{link: l, worker: hello.Worker, pod: hello.Pod, incarnation: hello.Incarnation}
	if !s.post(event{m: m, joined: true}) {
		s.untrack(nc)
		return nil
	}
	return m
}

// refuse tells a connection why it is not a member, unsigned (the peer may not hold the
// secret), and closes it.
func (s *session) refuse(l *link, why string) {
	s.log.Warn("gang: refused a connection", "peer", l.conn.RemoteAddr(), "why", why)
	l.key = nil
	_ = l.send(message{Type: typeRefused, Reason: why})
	s.untrack(l.conn)
}

// read hands m's messages to the loop until its connection ends.
func (s *session) read(m *member) {
	for {
		msg, err := m.recv()
		if err != nil {
			s.post(event{m: m, err: err})
			s.untrack(m.conn)
			return
		}
		if !s.post(event{m: m, msg: msg}) {
			return
		}
	}
}

// post hands e to the loop; false once the session is over.
func (s *session) post(e event) bool {
	select {
	case s.events <- e:
		return true
	case <-s.quit:
		return false
	}
}

// missing lists the worker indices without a member, in order, but those dropped or
// waiting to join.
func (s *session) missing() []int {
	var out []int
	for w := range s.c.Workers {
		if s.members[w] == nil && !s.dropped[w] && !s.joining[w] {
			out = append(out, w)
		}
	}
	return out
}

// active lists the worker indices the gang runs with (all but those dropped or waiting
// to join), in order: a worker's place in it is its node rank.
func (s *session) active() []int {
	var out []int
	for w := range s.c.Workers {
		if !s.dropped[w] && !s.joining[w] {
			out = append(out, w)
		}
	}
	return out
}

// join welcomes m, in place of an earlier member of its worker index, which is returned.
func (s *session) join(m *member) *member {
	old := s.members[m.worker]
	if old != nil {
		s.untrack(old.conn)
	}
	s.members[m.worker] = m
	if err := m.send(message{Type: typeWelcome}); err != nil {
		s.drop(m, err)
	}
	s.log.Info("gang: member joined", "worker", m.worker, "pod", m.pod, "incarnation", m.incarnation)
	return old
}

// drop forgets m and closes its connection.
func (s *session) drop(m *member, why error) {
	if s.members[m.worker] == m {
		delete(s.members, m.worker)
	}
	s.untrack(m.conn)
	s.log.Info("gang: member gone", "worker", m.worker, "pod", m.pod, "why", why)
}

// request answers a Drop or a Readmit in the loop, whatever it is doing (while the gang
// waits for workers, those dropped are no longer waited for), and reports whether e was
// one.
func (s *session) request(e event) bool {
	switch {
	case e.req == nil:
		return false
	case e.req.readmit:
		e.req.reply <- s.readmitWorkers(e.req.workers, e.req.reason)
	default:
		e.req.reply <- s.dropWorkers(e.req.workers, e.req.reason)
	}
	return true
}

// current reports whether e comes from a member the loop still counts.
func (s *session) current(e event) bool { return e.m != nil && s.members[e.m.worker] == e.m }

// sendAll sends msg to every member; one that cannot be reached is dropped and returned.
func (s *session) sendAll(msg message) []*member {
	var lost []*member
	for _, w := range slices.Sorted(maps.Keys(s.members)) {
		m := s.members[w]
		if err := m.send(msg); err != nil {
			s.drop(m, err)
			lost = append(lost, m)
		}
	}
	return lost
}

// workers says "worker 1" or "workers 1, 3".
func workers(ids []int) string {
	s := make([]string, len(ids))
	for i, w := range ids {
		s[i] = strconv.Itoa(w)
	}
	if len(ids) == 1 {
		return "worker " + s[0]
	}
	return "workers " + strings.Join(s, ", ")
}
