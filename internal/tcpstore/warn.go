package tcpstore

import (
	"log/slog"
	"sync"
	"time"
)

// warnEvery is the least time between two warnings of one warner.
const warnEvery = 10 * time.Second

// warner logs a warning at most once per warnEvery, with the number of warnings it
// held back since the last one it logged.
type warner struct {
	log *slog.Logger

	mu   sync.Mutex
	next time.Time // when the next warning may be logged
	held int       // warnings held back since the last one logged
}

// warn logs msg with args, unless one was logged less than warnEvery ago.
func (w *warner) warn(msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if now.Before(w.next) {
		w.held++
		w.mu.Unlock()
		return
	}
	held := w.held
	w.held, w.next = 0, now.Add(warnEvery)
	w.mu.Unlock()
	if held > 0 {
		args = append(args, "more_since_last_warning", held)
	}
	w.log.Warn(msg, args...)
}
