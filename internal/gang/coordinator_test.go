package gang

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A rank fails: every worker's attempt is stopped, and the same members start the next
// attempt; it succeeds, and the gang finishes succeeded with one restart in place.
func TestRestartInPlace(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, FirstAttempt: 3, MaxRestarts: 2, Restarts: 2, Disruptions: 1, MaxDisruptions: 5})
	m0, m1 := h.join(0, ""), h.join(1, "")
	h.expect("attempt 3", h.started, call{0, 3}, call{1, 3})
	h.end(1, rank1Dies)
	h.expect("worker 0 stopped", h.stopped, call{0, 3})
	h.expect("attempt 4 on the same members", h.started, call{0, 4}, call{1, 4})
	if f := h.worker(0); len(f.causes) != 1 || !errors.Is(f.causes[0], ErrStopped) {
		t.Errorf("worker 0's attempt 3 was stopped with causes %v; want %v (its launcher keeps its spares)", f.causes, ErrStopped)
	}
	st := h.c.Status()
	want := Status{State: Running, Attempt: 4, Restarts: 3, Disruptions: 1, InPlace: 1,
		LastRestart: "attempt 4 restarted in place after rank 1 (worker 1, pid 4242) exited with code 1"}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status while attempt 4 runs (-want +got):\n%s", diff)
	}
	h.end(0, succeeded)
	h.end(1, succeeded)
	r := h.finished()
	if r.err != nil || r.res.Outcome != Succeeded || r.res.Final != "" || r.res.Attempt != 4 || r.res.Restarts != 3 ||
		r.res.Reason != "all 2 workers succeeded in attempt 4" {
		t.Errorf("result: %+v, %v", r.res, r.err)
	}
	for i, m := range []*joined{m0, m1} {
		f := m.finished(t)
		if f.err != nil || f.fin != (Finish{Outcome: Succeeded, Reason: r.res.Reason, Attempt: 4, Restarts: 3, Disruptions: 1}) {
			t.Errorf("member %d: %+v, %v", i, f.fin, f.err)
		}
	}
}

// With no restarts left, a failure stops the gang and finishes it failed for good.
func TestRestartsExhausted(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, FirstAttempt: 2, MaxRestarts: 1, Restarts: 1, MaxDisruptions: 5})
	m0, m1 := h.join(0, ""), h.join(1, "")
	h.expect("attempt 2", h.started, call{0, 2}, call{1, 2})
	h.end(0, Ended{Outcome: Hung, Reason: "no rank printed or reported anything for 1s (--hang-timeout): the gang looks hung", Rank: -1, ExitCode: -1})
	h.expect("worker 1 stopped", h.stopped, call{1, 2})
	r := h.finished()
	want := "worker 0 looked hung (no rank printed or reported anything for 1s (--hang-timeout): the gang looks hung) in attempt 2; no restarts left (maxRestarts 1)"
	if r.err != nil || r.res.Outcome != Failed || r.res.Final != FinalRestarts || r.res.Reason != want {
		t.Errorf("result: %+v, %v; want failed for good: %s", r.res, r.err, want)
	}
	for i, m := range []*joined{m0, m1} {
		if f := m.finished(t); f.err != nil || f.fin.Outcome != Failed || f.fin.Final != FinalRestarts || f.fin.Reason != want {
			t.Errorf("member %d: %+v, %v", i, f.fin, f.err)
		}
	}
	h.none("no attempt 3", h.started, 100*time.Millisecond)
}

// A member whose pod stops says it is leaving: the others stop, the coordinator waits for
// another member of that worker index, and the next attempt is a disruption, not a
// restart. A second loss with no disruptions left fails the gang for good.
func TestMemberLostAndBack(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, MaxRestarts: 0, MaxDisruptions: 1})
	m0, m1 := h.join(0, ""), h.join(1, "")
	h.expect("attempt 1", h.started, call{0, 1}, call{1, 1})
	m1.cancel() // its pod stops
	h.expect("worker 1's processes stop with its pod, and worker 0's as told", h.stopped, call{1, 1}, call{0, 1})
	st := h.waitStatus("waiting for worker 1", func(s Status) bool { return s.Attempt == 2 && len(s.Missing) == 1 })
	if st.Missing[0] != 1 || st.Attempt != 2 || st.Disruptions != 1 || st.Restarts != 1 ||
		st.LastRestart != "attempt 2 restarted in place after worker 1 (pod pod-1) is leaving: its pod is stopping" {
		t.Errorf("status while worker 1 is missing: %+v", st)
	}
	h.none("no attempt without worker 1", h.started, 200*time.Millisecond)

	replaced := h.join(1, "") // the replaced pod
	h.expect("attempt 2 with worker 1's new member", h.started, call{0, 2}, call{1, 2})
	if f := m1.finished(t); !errors.Is(f.err, context.Canceled) {
		t.Errorf("the lost member: %+v, %v", f.fin, f.err)
	}

	replaced.cancel()
	h.expect("attempt 2 stopped", h.stopped, call{1, 2}, call{0, 2})
	r := h.finished()
	if r.res.Outcome != Failed || r.res.Final != FinalDisruptions || !strings.Contains(r.res.Reason, "not restarting: 1 disruptions already (maxDisruptions 1)") {
		t.Errorf("a second loss: %+v, %v", r.res, r.err)
	}
	if f := m0.finished(t); f.fin.Final != FinalDisruptions {
		t.Errorf("worker 0's member: %+v, %v", f.fin, f.err)
	}
}

// A lost worker that never comes back finishes the gang failed, naming it; not for good,
// as whoever made the pods may make them again.
func TestLostMemberNeverReturns(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, MaxDisruptions: 3, ReturnWait: 300 * time.Millisecond})
	m0, m1 := h.join(0, ""), h.join(1, "")
	h.expect("attempt 1", h.started, call{0, 1}, call{1, 1})
	m1.cancel()
	r := h.finished()
	if r.res.Outcome != Failed || r.res.Final != "" ||
		r.res.Reason != "attempt 2 could not start: worker 1 did not come back within 300ms (after worker 1 (pod pod-1) is leaving: its pod is stopping)" {
		t.Errorf("result: %+v, %v", r.res, r.err)
	}
	if f := m0.finished(t); f.fin.Outcome != Failed || f.fin.Final != "" {
		t.Errorf("worker 0's member: %+v, %v", f.fin, f.err)
	}
}

// A member that does not confirm in time that its processes stopped is dropped; it stops
// them itself, connects again, and only then does the next attempt start.
func TestMemberNeverConfirmsStop(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, MaxRestarts: 1, MaxDisruptions: 1, StopWait: 300 * time.Millisecond})
	h.join(0, "")
	h.join(1, "")
	hold := make(chan struct{})
	h.holdStops(0, hold)
	h.expect("attempt 1", h.started, call{0, 1}, call{1, 1})
	h.end(1, rank1Dies)
	h.waitStatus("worker 0 dropped", func(s Status) bool { return s.Attempt == 2 && len(s.Missing) == 1 && s.Missing[0] == 0 })
	h.none("no attempt 2 while worker 0's processes run", h.started, 300*time.Millisecond)
	close(hold)
	h.expect("worker 0 stopped", h.stopped, call{0, 1})
	h.expect("attempt 2 once worker 0 is back", h.started, call{0, 2}, call{1, 2})
	if st := h.c.Status(); st.Restarts != 1 || st.Disruptions != 0 {
		t.Errorf("a rank's failure is a restart, whatever its teardown: %+v", st)
	}
	h.end(0, succeeded)
	h.end(1, succeeded)
	if r := h.finished(); r.res.Outcome != Succeeded {
		t.Errorf("result: %+v, %v", r.res, r.err)
	}
}

// The coordinator refuses a hello from a worker index outside the gang, or under another
// secret, and goes on waiting for the gang's own members.
func TestRefusals(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, Secret: []byte("gang secret"), JoinWait: wait})
	cases := map[string]struct {
		worker int
		secret string
		want   string
	}{
		"unknown worker":   {worker: 2, secret: "gang secret", want: "worker 2 is not one of this gang's workers 0 to 1"},
		"another secret":   {worker: 1, secret: "other", want: "HMAC does not verify"},
		"no secret at all": {worker: 1, secret: "", want: "HMAC does not verify"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := h.join(tc.worker, tc.secret).finished(t)
			var refused *RefusedError
			if !errors.As(f.err, &refused) || !strings.Contains(f.err.Error(), tc.want) {
				t.Errorf("got %v; want a refusal saying %q", f.err, tc.want)
			}
		})
	}
	// Garbage and an overlong line get the connection closed (after a refusal, which an
	// overlong line's unread rest may keep from arriving).
	for _, line := range []string{"not json\n", strings.Repeat("x", MaxLine+10)} {
		conn, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		if _, err := r.ReadString('\n'); err != nil { // the challenge
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte(line))
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		rest, err := r.ReadString('\n')
		if err == nil {
			_, err = r.ReadString('\n')
		}
		if errors.Is(err, os.ErrDeadlineExceeded) || (rest != "" && !strings.Contains(rest, typeRefused)) {
			t.Errorf("after %.20q: %q, %v; want a refusal or the connection closed", line, rest, err)
		}
		conn.Close()
	}
	if st := h.c.Status(); st.State != Waiting || len(st.Missing) != 2 {
		t.Errorf("status after the refusals: %+v", st)
	}
	h.join(0, "gang secret")
	h.join(1, "gang secret")
	h.expect("the gang's own members start", h.started, call{0, 1}, call{1, 1})
}

// Without every worker within JoinWait, the gang finishes failed saying who is missing.
func TestJoinWait(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 3, JoinWait: 300 * time.Millisecond})
	m0 := h.join(0, "")
	r := h.finished()
	if want := "attempt 1 could not start: workers 1, 2 did not connect to worker 0 within 300ms"; r.res.Outcome != Failed || r.res.Reason != want || r.res.Final != "" {
		t.Errorf("result %+v, %v; want %q", r.res, r.err, want)
	}
	if f := m0.finished(t); f.fin.Outcome != Failed {
		t.Errorf("worker 0's member: %+v, %v", f.fin, f.err)
	}
	h.none("nothing started", h.started, 0)
}

// A member that loses its coordinator stops its processes and connects again, to a
// coordinator that took its place (worker 0's pod replaced).
func TestMemberReconnects(t *testing.T) {
	first := newHarness(t, &Coordinator{Workers: 1})
	m := first.join(0, "")
	first.expect("attempt 1", first.started, call{0, 1})
	first.cancel()
	first.expect("stopped when the coordinator went", first.stopped, call{0, 1})
	if r := first.finished(); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the first coordinator: %v", r.err)
	}

	ln, err := net.Listen("tcp", first.addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", first.addr, err)
	}
	c := &Coordinator{Workers: 1, FirstAttempt: 2}
	result := make(chan coordinated, 1)
	go func() {
		res, err := c.Run(context.Background(), ln)
		result <- coordinated{res, err}
	}()
	first.expect("attempt 2 under the new coordinator", first.started, call{0, 2})
	first.end(0, succeeded)
	if f := m.finished(t); f.err != nil || f.fin.Outcome != Succeeded || f.fin.Attempt != 2 {
		t.Errorf("member: %+v, %v", f.fin, f.err)
	}
	if r := <-result; r.res.Outcome != Succeeded {
		t.Errorf("the second coordinator: %+v, %v", r.res, r.err)
	}
}

// The framing refuses a replayed, a reordered and a tampered message.
func TestLinkRefusesReplayAndTamper(t *testing.T) {
	key := linkKey([]byte("s"), "c", "m")
	cases := map[string]func(lines []string) []string{
		"replayed":  func(l []string) []string { return []string{l[0], l[0]} },
		"reordered": func(l []string) []string { return []string{l[1]} },
		"tampered":  func(l []string) []string { return []string{strings.Replace(l[0], `"attempt":1`, `"attempt":9`, 1)} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			var sent strings.Builder
			w := &link{conn: fakeConn{&sent}, key: key, timeout: time.Second}
			for _, a := range []int{1, 2} {
				if err := w.send(message{Type: typeStart, Attempt: a}); err != nil {
					t.Fatal(err)
				}
			}
			lines := strings.SplitAfter(sent.String(), "\n")
			in := strings.Join(change(lines), "")
			r := &link{r: bufio.NewReader(strings.NewReader(in)), key: key}
			var err error
			for err == nil {
				_, err = r.recv()
			}
			if !errors.Is(err, errProtocol) {
				t.Errorf("got %v, want a protocol error", err)
			}
		})
	}
}

// fakeConn is a net.Conn that only collects what is written.
type fakeConn struct{ w *strings.Builder }

func (c fakeConn) Read([]byte) (int, error)         { return 0, errors.New("not readable") }
func (c fakeConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c fakeConn) Close() error                     { return nil }
func (c fakeConn) LocalAddr() net.Addr              { return nil }
func (c fakeConn) RemoteAddr() net.Addr             { return nil }
func (c fakeConn) SetDeadline(time.Time) error      { return nil }
func (c fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c fakeConn) SetWriteDeadline(time.Time) error { return nil }

// A member whose connection drops without a word (its node lost, its process killed) is
// lost too; and a rank's failure whose worker is lost as the gang stops is a disruption,
// not a restart (the lost worker's ranks failing made the others fail first).
func TestConnectionLost(t *testing.T) {
	h := newHarness(t, &Coordinator{Workers: 2, MaxRestarts: 0, MaxDisruptions: 2})
	h.join(0, "")
	raw := h.dialRaw(1)
	h.expect("attempt 1 on worker 0", h.started, call{0, 1})
	if msg := raw.next(t); msg.Type != typeStart || msg.Attempt != 1 {
		t.Fatalf("worker 1 got %+v, want start of attempt 1", msg)
	}
	raw.close()
	h.expect("worker 0 stopped", h.stopped, call{0, 1})
	st := h.waitStatus("waiting for worker 1", func(s Status) bool { return s.Attempt == 2 && len(s.Missing) == 1 })
	if st.Disruptions != 1 || st.LastRestart != "attempt 2 restarted in place after worker 1 (pod raw-1) was lost: EOF" {
		t.Errorf("status after a lost connection: %+v", st)
	}

	raw = h.dialRaw(1)
	h.expect("attempt 2 on worker 0", h.started, call{0, 2})
	raw.next(t) // start
	if err := raw.send(message{Type: typeEnded, Worker: 1, Attempt: 2, Outcome: Failed, Reason: "rank 1 (worker 1, pid 7) exited with code 1", Rank: 1, ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	if msg := raw.next(t); msg.Type != typeStop || msg.Attempt != 2 {
		t.Fatalf("worker 1 got %+v, want stop of attempt 2", msg)
	}
	raw.close()
	h.expect("worker 0 stopped", h.stopped, call{0, 2})
	st = h.waitStatus("waiting for worker 1 again", func(s Status) bool { return s.Attempt == 3 && len(s.Missing) == 1 })
	want := "attempt 3 restarted in place after rank 1 (worker 1, pid 7) exited with code 1 (as worker 1 (pod raw-1) was lost: EOF)"
	if st.Disruptions != 2 || st.Restarts != 2 || st.LastRestart != want {
		t.Errorf("status after a failure whose worker was lost: %+v; want 2 disruptions and %q", st, want)
	}
}
