package reporting

import (
	"io"
	"sync"
)

// maxUnreadReplies bounds the replies a connection holds that its client has not read.
// The helper pipelines reports and reads the replies only before its next request, so a
// server that stopped reading requests while a reply waits to be written could deadlock
// with a client blocked sending one: each waits for the other to read. The helper has at
// most a socket buffer of requests in flight (a few hundred), whose replies take a few
// tens of KiB; a client that never reads is stopped here.
const maxUnreadReplies = 1 << 20

// replyQueue holds a connection's replies until a writer goroutine has written them, so
// that reading requests never waits for the client to read replies (up to
// maxUnreadReplies). Replies that pile up are written together.
type replyQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	closed  bool  // no more replies: write what is pending, then stop
	err     error // the first write error: nothing more is written
	done    chan struct{}
}

// newReplyQueue starts a goroutine that writes the queued replies to w.
func newReplyQueue(w io.Writer) *replyQueue {
	q := &replyQueue{done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.write(w)
	return q
}

// put queues a reply line, waiting while maxUnreadReplies are queued. It returns false
// once a write has failed: the connection is gone.
func (q *replyQueue) put(line []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) >= maxUnreadReplies && q.err == nil {
		q.cond.Wait()
	}
	if q.err != nil {
		return false
	}
	q.pending = append(q.pending, line...)
	q.cond.Broadcast()
	return true
}

// close writes what is queued and waits for the writer to end.
func (q *replyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	<-q.done
}

func (q *replyQueue) write(w io.Writer) {
	defer close(q.done)
	var out []byte
	for {
		q.mu.Lock()
		for len(q.pending) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.pending) == 0 {
			q.mu.Unlock()
			return
		}
		out, q.pending = q.pending, out[:0]
		q.cond.Broadcast() // room for put
		q.mu.Unlock()
		if _, err := w.Write(out); err != nil {
			q.mu.Lock()
			q.err = err
			q.cond.Broadcast()
			q.mu.Unlock()
			return
		}
	}
}
