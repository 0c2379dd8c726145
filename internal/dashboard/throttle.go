package dashboard

import (
	"log/slog"
	"sync"
	"time"
)

// Failed sign-ins: a client gets failFree tries per failWindow, then waits for the window
// to end.
const (
	failFree   = 5
	failWindow = time.Minute
	maxClients = 4096
)

// throttle slows down repeated failed sign-ins, per client address: it bounds guesses
// of the token. A right one-time code passes it (login checks codes first), so that
// another user's failures from the same address never lock anyone out. It keeps the log
// short: it logs a client's first failure of a window, and at the window's end how many
// there were in all.
type throttle struct {
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	clients map[string]*failures
}

// failures are one client's failed sign-ins in the window that started at start.
type failures struct {
	start time.Time
	n     int
}

func newThrottle(now func() time.Time, log *slog.Logger) *throttle {
	return &throttle{now: now, log: log, clients: map[string]*failures{}}
}

// blocked returns how long client must wait before it may try again, 0 when it may now.
func (t *throttle) blocked(client string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[client]
	if f == nil || f.n < failFree {
		return 0
	}
	if left := f.start.Add(failWindow).Sub(t.now()); left > 0 {
		return left
	}
	return 0
}

// fail counts a failed sign-in of client.
func (t *throttle) fail(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	f := t.clients[client]
	if f == nil {
		for len(t.clients) >= maxClients {
			t.dropOldest()
		}
		f = &failures{start: now}
		t.clients[client] = f
		t.log.Warn("dashboard: a failed sign-in", "client", client)
	}
	f.n++
}

// sweep ends the windows that are over, logging how many failures each had.
func (t *throttle) sweep(now time.Time) {
	for c, f := range t.clients {
		if now.Sub(f.start) >= failWindow {
			t.end(c, f)
		}
	}
}

func (t *throttle) dropOldest() {
	var oldest string
	for c, f := range t.clients {
		if oldest == "" || f.start.Before(t.clients[oldest].start) {
			oldest = c
		}
	}
	t.end(oldest, t.clients[oldest])
}

func (t *throttle) end(client string, f *failures) {
	if f.n > 1 {
		t.log.Warn("dashboard: failed sign-ins", "client", client, "count", f.n, "since", f.start.Format(time.RFC3339))
	}
	delete(t.clients, client)
}
