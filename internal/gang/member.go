package gang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Ended is how a member's part of an attempt ended.
type Ended struct {
	Outcome Outcome // Succeeded, Failed or Hung
	// Reason is a sentence: "rank 1 (worker 1, pid 4242) exited with code 1".
	Reason string
	// Rank is the rank whose failure ended it, or -1.
	Rank int
	// ExitCode is that rank's exit code, or -1 (a signal, or no rank).
	ExitCode int
}

// Start is an attempt a member is told to run, and where its worker stands in it.
type Start struct {
	// Attempt is the attempt's number.
	Attempt int
	// Node is this worker's place among the attempt's workers (torchrun's node rank), and
	// Nodes their number: the worker's own index and the gang's size, unless the
	// coordinator dropped workers (Coordinator.Drop), which renumbers the rest in order.
	Node, Nodes int
}

// Finish is how the gang ended, as the coordinator told its members.
type Finish struct {
	Outcome Outcome // Succeeded or Failed
	Reason  string
	// Final, for a failed gang: FinalRestarts or FinalDisruptions when the coordinator
	// used up the restarts in place; "" when whoever made the pods may restart them.
	Final string
	// Attempt is the gang's last attempt; Restarts and Disruptions the run's restarts so
	// far (see Status).
	Attempt, Restarts, Disruptions int
}

// RefusedError is a coordinator's refusal of a member: a bad HMAC (another secret), a
// worker index outside the gang. Connecting again does not help.
type RefusedError struct{ Reason string }

// Error says why.
func (e *RefusedError) Error() string {
	return "worker 0's coordinator refused this worker: " + e.Reason
}

// Member runs a worker's part of the gang's attempts as its coordinator says (see the
// package doc). Set its fields, then call Run once.
type Member struct {
	// Addr is the coordinator's host:port.
	Addr string
	// Worker is this worker's index; Pod its pod's name, for messages.
	Worker int
	Pod    string
	// Secret must be the coordinator's.
	Secret []byte
	// ConnectWait bounds each wait for the coordinator: at the start, and after losing it
	// (worker 0's pod may be replaced). 0: DefaultConnectWait.
	ConnectWait time.Duration
	// Attempt runs this worker's processes of an attempt until they end, or until ctx
	// ends (a stop: it must return only once they are gone).
	Attempt func(ctx context.Context, start Start) Ended
	// Waiting, when set, is called in a goroutine of its own each time the member is
	// welcomed, before it is told to start anything: its gang may wait for other workers,
	// or this worker wait to join a gang that runs (Coordinator.Readmit), for a while. A
	// worker starts its ranks' Pythons there, so that they import torch meanwhile. It may
	// overlap the attempt that starts next.
	Waiting func()
	// Notify, when set, gets notices for people (the pod log).
	Notify func(string)
	// Logger gets diagnostics; nil: none.
	Logger *slog.Logger
}

// Run connects to the coordinator and runs the attempts it starts until it finishes the
// gang. It returns an error when the coordinator cannot be reached within ConnectWait,
// refuses this member (*RefusedError), or ctx ends; no attempt runs then.
func (m *Member) Run(ctx context.Context) (Finish, error) {
	if m.ConnectWait <= 0 {
		m.ConnectWait = DefaultConnectWait
	}
	if m.Logger == nil {
		m.Logger = slog.New(slog.DiscardHandler)
	}
	incarnation := nonce()[:12]
	for first := true; ; first = false {
		l, err := m.connect(ctx, incarnation, first)
		if err != nil {
			return Finish{}, err
		}
		fin, err := m.serve(ctx, l)
		l.close()
		if err == nil {
			return fin, nil
		}
		if ctx.Err() != nil {
			return Finish{}, ctx.Err()
		}
		m.notice("worker %d lost worker 0's coordinator at %s (%v); its processes are stopped; connecting again (up to %s)",
			m.Worker, m.Addr, err, m.ConnectWait)
	}
}

func (m *Member) notice(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	m.Logger.Info(msg)
	if m.Notify != nil {
		m.Notify(msg)
	}
}

// connect dials the coordinator and says hello until it is welcomed, for at most
// ConnectWait.
func (m *Member) connect(ctx context.Context, incarnation string, first bool) (*link, error) {
	begin := time.Now()
	deadline := begin.Add(m.ConnectWait)
	pause := 100 * time.Millisecond
	noticed := false
	for {
		l, err := m.hello(ctx, incarnation)
		var refused *RefusedError
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &refused), ctx.Err() != nil:
			return nil, err
		case time.Now().After(deadline):
			return nil, fmt.Errorf("worker 0's coordinator at %s did not answer within %s: %w", m.Addr, m.ConnectWait, err)
		case first && !noticed && time.Since(begin) > firstNotice:
			noticed = true
			m.notice("worker %d: waiting for worker 0's coordinator at %s (up to %s): %v", m.Worker, m.Addr, m.ConnectWait, err)
		}
		m.Logger.Debug("gang: connect", "addr", m.Addr, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*2, time.Second)
	}
}

// hello makes one connection and its handshake.
func (m *Member) hello(ctx context.Context, incarnation string) (*link, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAliveConfig: keepAlive}
	nc, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return nil, err
	}
	l := newLink(nc)
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	fail := func(err error) (*link, error) {
		l.close()
		return nil, err
	}
	challenge, err := l.recv()
	if err != nil {
		return fail(fmt.Errorf("read the challenge: %w", err))
	}
	if challenge.Type != typeChallenge || challenge.Nonce == "" {
		return fail(protocolError("%s instead of a challenge", challenge.Type))
	}
	mine := nonce()
	l.key = linkKey(m.Secret, challenge.Nonce, mine)
	hello := message{Type: typeHello, Worker: m.Worker, Pod: m.Pod, Incarnation: incarnation, Nonce: mine}
	if err := l.send(hello); err != nil {
		return fail(err)
	}
	env, err := l.readRaw()
	if err != nil {
		return fail(fmt.Errorf("read the answer to hello: %w", err))
	}
	var answer message
	if json.Unmarshal(env.Msg, &answer) == nil && answer.Type == typeRefused {
		// Unsigned: a coordinator with another secret still says why.
		return fail(&RefusedError{Reason: answer.Reason})
	}
	if answer, err = l.open(env); err != nil {
		return fail(err)
	}
	if answer.Type != typeWelcome {
		return fail(protocolError("%s instead of welcome", answer.Type))
	}
	_ = nc.SetDeadline(time.Time{})
	return l, nil
}

// ErrStopped is the cause of an attempt's context (context.Cause) when the coordinator
// stopped it: another attempt of the gang usually follows on the same workers (a restart in
// place or a resize), so the member's Attempt may keep what it prepared for it, such as
// Pythons that already imported torch.
var ErrStopped = errors.New("the gang's coordinator stopped the attempt")

// running is the attempt a member runs, if any.
type running struct {
	attempt  int
	cancel   context.CancelCauseFunc
	ended    chan Ended
	stopping bool // the coordinator asked it to stop
}

// serve runs the coordinator's orders on l until it finishes the gang (nil error), the
// connection fails or ctx ends. No attempt runs when it returns.
func (m *Member) serve(ctx context.Context, l *link) (Finish, error) {
	msgs := make(chan message)
	failed := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			msg, err := l.recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case msgs <- msg:
			case <-quit:
				return
			}
		}
	}()
	var cur *running
	halt := func() {
		if cur != nil {
			cur.cancel(nil)
			<-cur.ended
			cur = nil
		}
	}
	defer halt()
	var ended <-chan Ended
	if m.Waiting != nil {
		go m.Waiting()
	}
	for {
		select {
		case <-ctx.Done():
			return Finish{}, m.leave(ctx, l)
		case err := <-failed:
			return Finish{}, err
		case e := <-ended:
			if ctx.Err() != nil { // it ended because the pod stops
				return Finish{}, m.leave(ctx, l)
			}
			err := l.send(m.report(cur, e))
			cur.cancel(nil)
			cur, ended = nil, nil
			if err != nil {
				return Finish{}, err
			}
		case msg := <-msgs:
			switch msg.Type {
			case typeStart:
				if cur != nil {
					return Finish{}, protocolError("start of attempt %d while attempt %d runs", msg.Attempt, cur.attempt)
				}
				cur = m.start(ctx, Start{Attempt: msg.Attempt, Node: msg.Node, Nodes: msg.Nodes})
				ended = cur.ended
			case typeStop:
				if cur != nil && cur.attempt == msg.Attempt {
					cur.stopping = true
					cur.cancel(ErrStopped)
					continue // stopped is sent once its processes are gone
				}
				if err := l.send(message{Type: typeStopped, Worker: m.Worker, Attempt: msg.Attempt}); err != nil {
					return Finish{}, err
				}
			case typeFinish:
				halt()
				return Finish{Outcome: msg.Outcome, Reason: msg.Reason, Final: msg.Final, Attempt: msg.Attempt,
					Restarts: msg.Restarts, Disruptions: msg.Disruptions}, nil
			default:
				return Finish{}, protocolError("unexpected %s", msg.Type)
			}
		}
	}
}

// leave tells the coordinator that this worker's pod is stopping, so that it counts what
// follows (the peers' ranks failing without this worker's) as a disruption, and returns
// ctx's error.
func (m *Member) leave(ctx context.Context, l *link) error {
	_ = l.send(message{Type: typeLeaving, Worker: m.Worker, Reason: "its pod is stopping"})
	return ctx.Err()
}

// start runs attempt st in the background.
func (m *Member) start(ctx context.Context, st Start) *running {
	actx, cancel := context.WithCancelCause(ctx)
	r := &running{attempt: st.Attempt, cancel: cancel, ended: make(chan Ended, 1)}
	go func() { r.ended <- m.Attempt(actx, st) }()
	return r
}

// report is the message for the end of r: stopped when the coordinator asked for it,
// else ended.
func (m *Member) report(r *running, e Ended) message {
	if r.stopping {
		return message{Type: typeStopped, Worker: m.Worker, Attempt: r.attempt}
	}
	return message{Type: typeEnded, Worker: m.Worker, Attempt: r.attempt, Outcome: e.Outcome, Reason: e.Reason,
		Rank: e.Rank, ExitCode: e.ExitCode}
}
