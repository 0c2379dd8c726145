package checkpoint

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gate is a test hook that holds commits at one step until released.
type gate struct {
	step    string
	reached chan string   // gets the step each time a commit reaches it
	release chan struct{} // one value lets one held commit go on
}

func newGate(step string) *gate {
	return &gate{step: step, reached: make(chan string, 10), release: make(chan struct{}, 10)}
}

func (g *gate) hook(step string) error {
	if step == g.step {
		g.reached <- step
		<-g.release
	}
	return nil
}

func TestCommitterRunsInBackground(t *testing.T) {
	s := openStore(t)
	g := newGate("synced")
	s.testHook = g.hook
	c := NewCommitter(s, Policy{}, testLogger(t))
	parent := t.TempDir()
	src1 := writeCheckpoint(t, parent, 1)
	name, err := c.Submit(src1, Meta{Iteration: 1})
	if err != nil || name != "checkpoint_000001" {
		t.Fatalf("Submit = %s, %v", name, err)
	}
	<-g.reached // the first commit is in flight, held; Submit has returned
	checkSourceEmptied(t, src1, 0o700)
	if got := listNames(t, s); len(got) != 0 {
		t.Errorf("List while the commit is held: %v, want nothing yet", got)
	}
	second := make(chan string)
	go func() {
		name, err := c.Submit(writeCheckpoint(t, parent, 2), Meta{Iteration: 2})
		if err != nil {
			t.Error(err)
		}
		second <- name
	}()
	select {
	case name := <-second:
		t.Fatalf("the second Submit (%s) returned while the first commit was in flight", name)
	case <-time.After(200 * time.Millisecond):
	}
	g.release <- struct{}{}
	if name := <-second; name != "checkpoint_000002" {
		t.Errorf("second Submit = %s, want checkpoint_000002", name)
	}
	g.release <- struct{}{}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"checkpoint_000001", "checkpoint_000002"}, listNames(t, s)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestCommitterErr(t *testing.T) {
	s := openStore(t)
	var mu sync.Mutex
	calls := 0
	s.testHook = func(step string) error {
		mu.Lock()
		defer mu.Unlock()
		if step == "manifest" {
			calls++
			if calls == 1 {
				return errInjected
			}
		}
		return nil
	}
	c := NewCommitter(s, Policy{Keep: 1}, testLogger(t))
	parent := t.TempDir()
	if _, err := c.Submit(writeCheckpoint(t, parent, 1), Meta{}); err != nil {
		t.Fatalf("Submit returned the background error: %v", err)
	}
	if _, err := c.Submit(writeCheckpoint(t, parent, 2), Meta{}); err != nil {
		t.Fatal(err)
	}
	err := c.Err() // the first commit has finished: Submit waited for it
	if !errors.Is(err, errInjected) || !strings.HasPrefix(err.Error(), "commit checkpoint_000001: ") {
		t.Errorf("Err = %v, want the first commit's failure", err)
	}
	if err := c.Err(); err != nil {
		t.Errorf("second Err = %v, want nil (cleared)", err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("Wait = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{"checkpoint_000002"}, listNames(t, s)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestCommitterRefusesAtOnce(t *testing.T) {
	s := openStore(t)
	c := NewCommitter(s, Policy{}, testLogger(t))
	if _, err := c.Submit(t.TempDir()+"/missing", Meta{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Submit of a missing folder: %v", err)
	}
	name, err := c.Submit(writeCheckpoint(t, t.TempDir(), 1), Meta{})
	if err != nil || name != "checkpoint_000001" {
		t.Errorf("Submit after a refused one = %s, %v; want checkpoint_000001", name, err)
	}
	if err := c.Wait(); err != nil {
		t.Error(err)
	}
}

func TestCommitterRetainsAndWarnsOnce(t *testing.T) {
	s := openStore(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c := NewCommitter(s, Policy{Keep: 1, Score: "acc"}, logger)
	parent := t.TempDir()
	for i := 1; i <= 3; i++ {
		if _, err := c.Submit(writeCheckpoint(t, parent, i), Meta{Metrics: Metrics{"loss": float64(i)}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Errorf("commit %d: %v; a retention warning is no commit error", i, err)
		}
	}
	want := `--checkpoint-score acc: reports have no metric \"acc\" (they have: loss); keeping checkpoint_000001"`
	if n := strings.Count(logs.String(), "no metric"); n != 1 || !strings.Contains(logs.String(), want) {
		t.Errorf("log has %d warnings about the metric, want 1 with %s:\n%s", n, want, logs.String())
	}
	if diff := cmp.Diff([]string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000003"}, listNames(t, s)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	c = NewCommitter(s, Policy{Keep: 1}, testLogger(t))
	if _, err := c.Submit(writeCheckpoint(t, parent, 4), Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"checkpoint_000004"}, listNames(t, s)); diff != "" {
		t.Errorf("List after Keep 1 (-want +got):\n%s", diff)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
