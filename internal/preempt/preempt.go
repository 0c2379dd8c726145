// Package preempt tells a gang's ranks that the gang must stop, and by when, so that they
// can save a checkpoint first: the preemption notice.
//
// When Trainyard must stop a job that did not ask to stop (SIGTERM, SIGINT or SIGHUP to
// `trainyard run`, the job server preempting it for a job of higher priority, a pod's
// SIGTERM from an eviction, a Kueue preemption or a node drain), the launcher posts a
// Notice instead of signalling the ranks at once. The notice is a small JSON file
// ({"deadline": unix seconds, "reason": "..."}) in the launcher's private folder, named to
// the ranks by EnvFile; the in-job helper's trainyard.preemption() reads it (a stat per
// call while there is none). The launcher then waits, up to the deadline, for a
// checkpoint reported after the notice to be committed (Committed), and only then stops
// the ranks as it would have. The deadline leaves the end of the grace period for the stop
// itself (Deadline).
//
// This is the cooperative model of Determined's should_preempt() and Ray Train's
// get_preemption_info(), with the signal's grace period as the budget, as Kubernetes gives
// a pod terminationGracePeriodSeconds after SIGTERM.
package preempt

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/durable"
)

// EnvFile names, in every rank's environment, the file the notice is written to.
const EnvFile = "TRAINYARD_PREEMPTION_FILE"

// FileName is the notice's file name in the launcher's private folder.
const FileName = "preemption.json"

// Deadline is when the ranks must have saved, for a stop that began at start with a
// grace period of grace: the grace period less the time kept for stopping the ranks
// (a sixth of it, at least a second and at most 5 s). Zero when the grace period leaves
// no time to save.
func Deadline(start time.Time, grace time.Duration) time.Time {
	keep := min(max(grace/6, time.Second), 5*time.Second)
	if grace <= keep {
		return time.Time{}
	}
	return start.Add(grace - keep)
}

// Content is what the notice file holds.
type Content struct {
	// Deadline is when the gang stops, in seconds since the Unix epoch.
	Deadline float64 `json:"deadline"`
	// Reason says why: "SIGTERM", "preempted by job hi (priority 5)".
	Reason string `json:"reason"`
}

// Notice is one run's preemption notice on this machine. Its methods are safe for
// concurrent use.
type Notice struct {
	path string

	mu        sync.Mutex
	posted    time.Time // zero until Post
	heard     bool      // a rank has used the helper's reports
	saved     chan string
	savedOnce *sync.Once
	// waiters wait for the next checkpoint reported after a time (CommittedAfter).
	waiters []commitWaiter
	latest  string // the newest checkpoint committed, or the one the run resumed from
}

// commitWaiter is one CommittedAfter.
type commitWaiter struct {
	after time.Time
	ch    chan string
}

// New returns the notice written to dir/FileName; dir should be private to the job's
// user (the report socket's folder).
func New(dir string) *Notice {
	return &Notice{path: filepath.Join(dir, FileName), saved: make(chan string, 1), savedOnce: new(sync.Once)}
}

// Path is the notice file, for EnvFile.
func (n *Notice) Path() string { return n.path }

// Heard records that a rank reported through the helper: such a job can hear the notice.
func (n *Notice) Heard() {
	n.mu.Lock()
	n.heard = true
	n.mu.Unlock()
}

// Listening says whether the ranks can hear the notice: one reported through the helper,
// or a launcher started by one (a Ray Train driver's gang) said it follows the notice
// (Listen).
func (n *Notice) Listening() bool {
	n.mu.Lock()
	heard := n.heard
	n.mu.Unlock()
	if heard {
		return true
	}
	_, err := os.Lstat(n.path + listeningSuffix)
	return err == nil
}

// listeningSuffix names, beside a notice's file, the mark a launcher leaves when it
// follows that notice.
const listeningSuffix = ".listening"

// Listen marks the notice file path as followed by a launcher started inside the job that
// holds it (see Listening). A failure only means the outer launcher will not wait for this
// one's ranks to save.
func Listen(path string) {
	if f, err := os.OpenFile(path+listeningSuffix, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	}
}

// Post writes the notice: the ranks must save by deadline, for reason. The file is
// replaced whole (a rename), so a rank never reads half of it.
func (n *Notice) Post(deadline time.Time, reason string) error {
	data, err := json.Marshal(Content{Deadline: float64(deadline.UnixNano()) / 1e9, Reason: reason})
	if err != nil {
		return err
	}
	if err := durable.WriteFile(n.path, data, 0o600); err != nil {
		return fmt.Errorf("write the preemption notice: %w", err)
	}
	n.mu.Lock()
	n.posted = time.Now()
	n.mu.Unlock()
	return nil
}

// Posted returns when the notice was posted, and whether it was.
func (n *Notice) Posted() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.posted, !n.posted.IsZero()
}

// Committed is called when the checkpoint name, reported at the time reported, has been
// committed. The first one reported after the notice was posted is sent on Saved.
func (n *Notice) Committed(name string, reported time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.latest = name
	keep := n.waiters[:0]
	for _, w := range n.waiters {
		if reported.Before(w.after) {
			keep = append(keep, w)
			continue
		}
		w.ch <- name
	}
	n.waiters = keep
	if n.posted.IsZero() || reported.Before(n.posted) {
		return
	}
	saved := n.saved
	n.savedOnce.Do(func() { saved <- name })
}

// Resumes records the checkpoint an attempt resumes from, which Latest returns until a
// newer one is committed.
func (n *Notice) Resumes(name string) {
	n.mu.Lock()
	n.latest = name
	n.mu.Unlock()
}

// Latest returns the name of the newest checkpoint committed in this run that the notice
// heard of (Committed, Resumes): what a gang stopped now resumes from. "" when none.
func (n *Notice) Latest() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.latest
}

// Saved receives the name of the first checkpoint committed after the notice.
func (n *Notice) Saved() <-chan string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.saved
}

// CommittedAfter returns a channel that receives the name of the first checkpoint
// reported at or after t once it is committed, whether or not a notice is posted: an
// elastic gang grows there.
func (n *Notice) CommittedAfter(t time.Time) <-chan string {
	ch := make(chan string, 1)
	n.mu.Lock()
	n.waiters = append(n.waiters, commitWaiter{after: t, ch: ch})
	n.mu.Unlock()
	return ch
}

// Clear takes the notice back, for the next attempt of a gang that goes on (an elastic
// gang stopped to resize): its file is removed, and the next Post starts over.
func (n *Notice) Clear() error {
	n.mu.Lock()
	n.posted, n.saved, n.savedOnce, n.waiters = time.Time{}, make(chan string, 1), new(sync.Once), nil
	n.mu.Unlock()
	if err := os.Remove(n.path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("clear the preemption notice: %w", err)
	}
	return nil
}

// Read reads the notice file at path: the content, and false when there is none.
func Read(path string) (Content, bool, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Content{}, false, nil
	}
	if err != nil {
		return Content{}, false, err
	}
	var c Content
	if err := json.Unmarshal(data, &c); err != nil {
		return Content{}, false, fmt.Errorf("preemption notice %s: %w", path, err)
	}
	return c, true, nil
}

// EnvReason names, in a job server's supervisor, the file where the server writes why it
// stops the job before it sends SIGTERM ("preempted by job hi (priority 5)"), so that the
// notice says so instead of "SIGTERM".
const EnvReason = "TRAINYARD_STOP_REASON_FILE"

// maxReason bounds the reason read from an EnvReason file.
const maxReason = 1 << 10

// WriteReason writes why a job is stopped to path (0600, replaced whole).
func WriteReason(path, why string) error {
	if err := durable.WriteFile(path, []byte(why), 0o600); err != nil {
		return fmt.Errorf("write the stop reason: %w", err)
	}
	return nil
}

// ReadReason reads the reason at path: "" when there is none or it cannot be read.
func ReadReason(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxReason)
	n, _ := io.ReadFull(f, buf)
	return strings.TrimSpace(strings.ToValidUTF8(string(buf[:n]), "?"))
}

// EnvResize names, in a job server's supervisor of an elastic gang, the file where the
// server asks it to run at another size (a ResizeRequest); the supervisor looks at it
// a few times a second.
const EnvResize = "TRAINYARD_RESIZE_FILE"

// ResizeRequest is what a job server asks of an elastic gang's supervisor: run with
// these workers on these GPUs, from the next checkpoint.
type ResizeRequest struct {
	// Seq tells requests apart: a supervisor acts on each Seq once.
	Seq int64 `json:"seq"`
	// GPUs holds the NVML indices of each worker's GPUs after the resize; its length is
	// the number of workers (a worker without GPUs has an empty set).
	GPUs [][]int `json:"gpus"`
	// Reason says why: "GPUs 2,3 free".
	Reason string `json:"reason"`
	// Now asks the ranks to save at once (the preemption notice): a shrink to make room
	// for another job. Otherwise the gang resizes at its next committed checkpoint.
	Now bool `json:"now,omitempty"`
}

// WriteResize writes the request to path (0600, replaced whole).
func WriteResize(path string, r ResizeRequest) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write the resize request: %w", err)
	}
	return nil
}

// ReadResize reads the request at path: false when there is none.
func ReadResize(path string) (ResizeRequest, bool, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return ResizeRequest{}, false, nil
	}
	if err != nil {
		return ResizeRequest{}, false, err
	}
	defer f.Close()
	var r ResizeRequest
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&r); err != nil {
		return ResizeRequest{}, false, fmt.Errorf("resize request %s: %w", path, err)
	}
	if len(r.GPUs) == 0 {
		return ResizeRequest{}, false, fmt.Errorf("resize request %s: no workers", path)
	}
	return r, true, nil
}
