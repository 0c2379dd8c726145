// Package pause waits in loops that poll: for a while, or until the context ends.
package pause

import (
	"context"
	"time"
)

// For waits for d, or returns ctx's error when ctx ends first.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
