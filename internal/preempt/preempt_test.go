package preempt

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, c := range []struct {
		grace, want time.Duration
	}{
		{30 * time.Second, 25 * time.Second}, // a spot notice: 5 s kept for the stop
		{120 * time.Second, 115 * time.Second},
		{6 * time.Second, 5 * time.Second},
		{3 * time.Second, 2 * time.Second}, // at least a second to stop
		{time.Second, 0},                   // no time to save
		{0, 0},
	} {
		got := Deadline(start, c.grace)
		if c.want == 0 {
			if !got.IsZero() {
				t.Errorf("grace %s: deadline %v, want none", c.grace, got)
			}
			continue
		}
		if got.Sub(start) != c.want {
			t.Errorf("grace %s: deadline after %s, want %s", c.grace, got.Sub(start), c.want)
		}
	}
}

// The notice is read back whole; only a checkpoint reported after it counts as saved,
// once.
func TestNotice(t *testing.T) {
	dir := t.TempDir()
	n := New(dir)
	if _, ok, err := Read(n.Path()); ok || err != nil {
		t.Fatalf("before Post: %v %v", ok, err)
	}
	before := time.Now()
	n.Committed("checkpoint_000001", before) // before the notice: ignored
	deadline := time.Now().Add(25 * time.Second)
	if err := n.Post(deadline, "preempted by job hi (priority 5)"); err != nil {
		t.Fatal(err)
	}
	c, ok, err := Read(n.Path())
	if err != nil || !ok || c.Reason != "preempted by job hi (priority 5)" ||
		c.Deadline != float64(deadline.UnixNano())/1e9 {
		t.Fatalf("read %+v %v %v", c, ok, err)
	}
	n.Committed("checkpoint_000001", before)
	select {
	case name := <-n.Saved():
		t.Fatalf("a checkpoint reported before the notice counted: %s", name)
	default:
	}
	n.Committed("checkpoint_000002", time.Now())
	n.Committed("checkpoint_000003", time.Now())
	if name := <-n.Saved(); name != "checkpoint_000002" {
		t.Errorf("saved %s, want the first after the notice", name)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want the notice only", len(entries))
	}
}

// Latest is the checkpoint a gang stopped now resumes from: the one its attempt resumed
// from, then each committed, whether or not a notice is out or the notice is cleared.
func TestLatest(t *testing.T) {
	n := New(t.TempDir())
	if got := n.Latest(); got != "" {
		t.Errorf("Latest() = %q before any checkpoint, want none", got)
	}
	n.Resumes("checkpoint_000003")
	if got := n.Latest(); got != "checkpoint_000003" {
		t.Errorf("Latest() = %q, want the one resumed from", got)
	}
	n.Committed("checkpoint_000004", time.Now())
	if err := n.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := n.Latest(); got != "checkpoint_000004" {
		t.Errorf("Latest() = %q after a commit and Clear, want checkpoint_000004", got)
	}
}

func TestListening(t *testing.T) {
	n := New(t.TempDir())
	if n.Listening() {
		t.Fatal("listening before anything")
	}
	n.Heard()
	if !n.Listening() {
		t.Fatal("not listening after a report")
	}
	m := New(t.TempDir())
	Listen(m.Path()) // a launcher started inside the job follows it
	if !m.Listening() {
		t.Fatal("not listening after Listen")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(m.Path()), FileName)); !os.IsNotExist(err) {
		t.Errorf("Listen posted a notice: %v", err)
	}
}

func TestReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.stop")
	if got := ReadReason(path); got != "" {
		t.Errorf("no file: %q", got)
	}
	if err := WriteReason(path, "preempted by job hi (priority 5)\n"); err != nil {
		t.Fatal(err)
	}
	if got := ReadReason(path); got != "preempted by job hi (priority 5)" {
		t.Errorf("read %q", got)
	}
	if err := WriteReason(path, string(make([]byte, 5000))+"\xff"); err != nil {
		t.Fatal(err)
	}
	if got := ReadReason(path); len(got) > maxReason {
		t.Errorf("read %d bytes, want at most %d", len(got), maxReason)
	}
}
