package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	if err := For(context.Background(), time.Millisecond); err != nil {
		t.Errorf("a pause that ran out: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("a pause whose context ended: %v after %v", err, time.Since(start))
	}
}
