package gang

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// wait bounds every wait of these tests.
const wait = 10 * time.Second

// call is one start of an attempt in a fake worker.
type call struct {
	worker, attempt int
}

// fakeWorker plays a worker's launcher: each attempt it is told to start runs until the
// test ends it (end) or the member stops it; stopping takes hold, then returns.
type fakeWorker struct {
	worker  int
	started chan call
	stopped chan call
	ends    chan Ended
	mu      sync.Mutex
	hold    chan struct{} // while set, a stopped attempt waits for it to close
	causes  []error       // why each stopped attempt's context ended (context.Cause)
	starts  []Start       // every attempt it was told to start
}

func (f *fakeWorker) attempt(ctx context.Context, st Start) Ended {
	n := st.Attempt
	f.mu.Lock()
	f.starts = append(f.starts, st)
	f.mu.Unlock()
	f.started <- call{f.worker, n}
	select {
	case e := <-f.ends:
		return e
	case <-ctx.Done():
	}
	f.mu.Lock()
	hold := f.hold
	f.causes = append(f.causes, context.Cause(ctx))
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.stopped <- call{f.worker, n}
	return Ended{Outcome: Failed, Reason: "interrupted", Rank: -1, ExitCode: -1}
}

// harness is a coordinator on a loopback port and the fake workers of its members.
type harness struct {
	t       *testing.T
	c       *Coordinator
	addr    string
	started chan call
	stopped chan call
	workers map[int]*fakeWorker
	result  chan coordinated
	cancel  context.CancelFunc
	notices chan string
}

type coordinated struct {
	res Result
	err error
}

// joined is a member's Run in the background.
type joined struct {
	cancel context.CancelFunc
	done   chan finished
}

type finished struct {
	fin Finish
	err error
}

func newHarness(t *testing.T, c *Coordinator) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, addr: ln.Addr().String(), started: make(chan call, 64), stopped: make(chan call, 64),
		workers: map[int]*fakeWorker{}, result: make(chan coordinated, 1), notices: make(chan string, 256)}
	c.Notify = func(s string) {
		select {
		case h.notices <- s:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		res, err := c.Run(ctx, ln)
		h.result <- coordinated{res, err}
	}()
	t.Cleanup(cancel)
	return h
}

// worker returns the fake worker of index w, made once.
func (h *harness) worker(w int) *fakeWorker {
	f := h.workers[w]
	if f == nil {
		f = &fakeWorker{worker: w, started: h.started, stopped: h.stopped, ends: make(chan Ended, 1)}
		h.workers[w] = f
	}
	return f
}

// join runs a member of worker w with secret until the test ends.
func (h *harness) join(w int, secret string) *joined {
	m := &Member{Addr: h.addr, Worker: w, Pod: fmt.Sprintf("pod-%d", w), Secret: []byte(secret),
		ConnectWait: wait, Attempt: h.worker(w).attempt}
	return h.run(m)
}

func (h *harness) run(m *Member) *joined {
	ctx, cancel := context.WithCancel(context.Background())
	j := &joined{cancel: cancel, done: make(chan finished, 1)}
	go func() {
		fin, err := m.Run(ctx)
		j.done <- finished{fin, err}
	}()
	h.t.Cleanup(cancel)
	return j
}

// expect takes the next n calls from ch, in any order, and fails unless they are want.
func (h *harness) expect(what string, ch chan call, want ...call) {
	h.t.Helper()
	got := map[call]bool{}
	for range want {
		select {
		case c := <-ch:
			got[c] = true
		case <-time.After(wait):
			h.t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
	for _, c := range want {
		if !got[c] {
			h.t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

// none fails if ch gets a call within d.
func (h *harness) none(what string, ch chan call, d time.Duration) {
	h.t.Helper()
	select {
	case c := <-ch:
		h.t.Fatalf("%s: unexpected %+v", what, c)
	case <-time.After(d):
	}
}

func (h *harness) end(w int, e Ended) { h.worker(w).ends <- e }

// lastStart is the last attempt worker w was told to start.
func (h *harness) lastStart(w int) Start {
	f := h.worker(w)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.starts) == 0 {
		return Start{}
	}
	return f.starts[len(f.starts)-1]
}

// holdStops makes worker w's stopped attempts wait until hold is closed.
func (h *harness) holdStops(w int, hold chan struct{}) {
	f := h.worker(w)
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
}

func (h *harness) finished() coordinated {
	h.t.Helper()
	select {
	case r := <-h.result:
		return r
	case <-time.After(wait):
		h.t.Fatal("the coordinator did not finish")
		return coordinated{}
	}
}

func (j *joined) finished(t *testing.T) finished {
	t.Helper()
	select {
	case f := <-j.done:
		return f
	case <-time.After(wait):
		t.Fatal("the member did not finish")
		return finished{}
	}
}

// waitStatus waits until the coordinator's status satisfies ok.
func (h *harness) waitStatus(what string, ok func(Status) bool) Status {
	h.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		st := h.c.Status()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: status %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	succeeded = Ended{Outcome: Succeeded, Rank: -1, ExitCode: -1}
	rank1Dies = Ended{Outcome: Failed, Reason: "rank 1 (worker 1, pid 4242) exited with code 1", Rank: 1, ExitCode: 1}
)

// rawMember speaks the protocol by hand, for what a Member never does.
type rawMember struct{ *link }

// dialRaw connects as worker w (no secret) and reads the welcome.
func (h *harness) dialRaw(w int) *rawMember {
	h.t.Helper()
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	r := &rawMember{newLink(nc)}
	h.t.Cleanup(r.close)
	if msg := r.next(h.t); msg.Type != typeChallenge {
		h.t.Fatalf("got %+v, want a challenge", msg)
	}
	if err := r.send(message{Type: typeHello, Worker: w, Pod: fmt.Sprintf("raw-%d", w), Nonce: "n"}); err != nil {
		h.t.Fatal(err)
	}
	if msg := r.next(h.t); msg.Type != typeWelcome {
		h.t.Fatalf("got %+v, want welcome", msg)
	}
	return r
}

func (r *rawMember) next(t *testing.T) message {
	t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(wait))
	msg, err := r.recv()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}
