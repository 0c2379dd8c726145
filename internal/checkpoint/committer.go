package checkpoint

import (
	"errors"
	"log/slog"
	"sync"
)

// Committer commits checkpoints in the background while training goes on, one at a time,
// and applies a retention policy after each. Its methods are safe for concurrent use.
// A commit that fails leaves the checkpoint's files in the taken folder its error names.
type Committer struct {
	store  *Store
	policy Policy
	logger *slog.Logger

	submit sync.Mutex // serializes Submit, so commits run in the order of their indices

	mu          sync.Mutex
	done        chan struct{} // closed when the in-flight commit ends; nil before the first
	err         error         // errors of finished commits not yet returned by Err or Wait
	scoreWarned map[string]bool
	onCommit    func(Info) // called after each commit that succeeded; nil for none
	onCollision func(name string, collisions []Collision)
}

// OnCommit sets a function called after each commit that succeeds, with the committed
// checkpoint, before the retention policy runs.
func (c *Committer) OnCommit(f func(Info)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onCommit = f
}

// NewCommitter returns a Committer that commits into store and then applies policy.
func NewCommitter(store *Store, policy Policy, logger *slog.Logger) *Committer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Committer{store: store, policy: policy, logger: logger, scoreWarned: make(map[string]bool)}
}

// Submit takes the checkpoint folder src at once (see Store.Take; its errors are returned
// here), reserves the checkpoint's name, waits for the previous commit if it is still
// running, and starts committing src in the background. It returns the name the checkpoint
// will have. Errors of the background commit come from Err or Wait.
func (c *Committer) Submit(src string, meta Meta) (string, error) {
	c.submit.Lock()
	defer c.submit.Unlock()
	t, err := c.store.Take(src)
	if err != nil {
		return "", err
	}
	index := c.store.reserve()
	c.waitInFlight()
	done := make(chan struct{})
	c.mu.Lock()
	c.done = done
	c.mu.Unlock()
	go c.run(t, index, meta, done)
	return checkpointName(index), nil
}

// run commits t and applies the retention policy, then closes done. A failed commit is
// kept for Err; retention problems are only logged (a missing score metric once), as the
// new checkpoint is committed all the same.
func (c *Committer) run(t *Taken, index int, meta Meta, done chan struct{}) {
	c.runMerged([]*Taken{t}, index, meta, done)
}

// runMerged is run for the taken folders ts, merged into one checkpoint.
func (c *Committer) runMerged(ts []*Taken, index int, meta Meta, done chan struct{}) {
	defer close(done)
	info, collisions, err := c.store.commitMerged(ts, index, meta)
	if err != nil {
		c.logger.Error("checkpoint commit failed", "err", err)
		c.record(err)
		return
	}
	c.mu.Lock()
	f, onCollision := c.onCommit, c.onCollision
	c.mu.Unlock()
	if len(collisions) > 0 && onCollision != nil {
		onCollision(info.Name, collisions)
	}
	if f != nil {
		f(info)
	}
	deleted, err := c.store.Retain(c.policy)
	if len(deleted) > 0 {
		c.logger.Info("deleted checkpoints by retention policy", "after", info.Name, "deleted", deleted)
	}
	var score *ScoreError
	if errors.As(err, &score) {
		c.mu.Lock()
		first := !c.scoreWarned[score.Metric]
		c.scoreWarned[score.Metric] = true
		c.mu.Unlock()
		if first {
			c.logger.Warn("checkpoint retention", "err", score)
		}
		err = withoutScore(err)
	}
	if err != nil {
		c.logger.Error("checkpoint retention failed", "after", info.Name, "err", err)
	}
}

// withoutScore returns err without its *ScoreError parts (Retain joins them).
func withoutScore(err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		if _, isScore := err.(*ScoreError); isScore {
			return nil
		}
		return err
	}
	var rest []error
	for _, e := range joined.Unwrap() {
		if _, isScore := e.(*ScoreError); !isScore {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}

// record keeps err for Err.
func (c *Committer) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = errors.Join(c.err, err)
}

// waitInFlight waits for the commit in flight, if any.
func (c *Committer) waitInFlight() {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Err returns the errors of background commits that failed since the last call, and
// forgets them; nil when there were none. Retention problems are not errors of the commit:
// they are logged (a missing score metric once per metric).
func (c *Committer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.err
	c.err = nil
	return err
}

// Wait waits for the commit in flight, if any, and then returns what Err returns.
func (c *Committer) Wait() error {
	c.waitInFlight()
	return c.Err()
}
