package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// killRecorder signals as syscall.Kill does, and records every signal sent to a process
// group whose leader was already reaped (no /proc entry, not even a zombie): such a group
// id may belong to another process by then.
type killRecorder struct {
	mu      sync.Mutex
	sent    map[int][]syscall.Signal // by group id
	strayed []string
}

func recordKills(h *harness) *killRecorder {
	k := &killRecorder{sent: map[int][]syscall.Signal{}}
	h.l.kill = k.kill
	return k
}

func (k *killRecorder) kill(pid int, sig syscall.Signal) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if pid < 0 {
		k.sent[-pid] = append(k.sent[-pid], sig)
		if _, err := os.Stat("/proc/" + strconv.Itoa(-pid)); err != nil {
			k.strayed = append(k.strayed, fmt.Sprintf("%s to group %d after its leader was reaped", sig, -pid))
		}
	}
	return syscall.Kill(pid, sig)
}

func (k *killRecorder) check(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.strayed {
		t.Errorf("signalled a reaped worker's group: %s", s)
	}
}

// A rank that exited long before the gang's teardown is not signalled by it: its group id
// is no longer the launcher's once the rank was reaped.
func TestTeardownSparesReapedRanks(t *testing.T) {
	// Rank 1 exits at once; rank 0 fails once rank 1 is reaped (no /proc entry); rank 2
	// runs until the teardown stops it.
	job := makeJob(t, `case "$RANK" in
1) echo $$ > pid-1; exit 0;;
0) until [ -s pid-1 ]; do sleep 0.02; done; pid=$(cat pid-1)
   while [ -e /proc/$pid ]; do sleep 0.02; done; exit 3;;
*) exec sleep 300;;
esac`).workers(3).obj(t)
	h := newHarness(t, job)
	kills := recordKills(h)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Failed || res.Last.FailedRank != 0 {
		t.Fatalf("got %+v, want failure of rank 0\n%s", res, h.out)
	}
	kills.check(t)
	ranks := h.l.Folder.Record().Attempts[0].Ranks
	if r := ranks[2]; r.Signal != "SIGTERM" || !r.StoppedByTrainyard {
		t.Errorf("rank 2 record = %+v, want stopped by trainyard with SIGTERM", r)
	}
	kills.mu.Lock()
	defer kills.mu.Unlock()
	for _, sig := range kills.sent[ranks[1].PID] {
		if sig != syscall.SIGKILL {
			t.Errorf("rank 1's group got %s; want only the SIGKILL for its leftovers as it exited", sig)
		}
	}
}

// A child that a rank leaves behind (a DataLoader worker, say) is killed as soon as the
// rank exits, while the rest of the gang runs on.
func TestLeftoverChildKilledWhenRankExits(t *testing.T) {
	job := makeJob(t, `if [ "$RANK" = 1 ]; then sleep 300 & echo $! > child-1; exit 0; fi; exec sleep 300`).
		workers(2).obj(t)
	h := newHarness(t, job)
	kills := recordKills(h)
	ctx, cancel := context.WithCancel(context.Background())
	childGone := make(chan bool, 1)
	go func() {
		defer cancel()
		path := filepath.Join(job.Spec.WorkingDir, "child-1")
		var child int
		for deadline := time.Now().Add(30 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			data, _ := os.ReadFile(path)
			child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		ok := false
		for deadline := time.Now().Add(20 * time.Second); child != 0 && !ok && time.Now().Before(deadline); {
			ok = gone(child)
		}
		childGone <- ok
	}()
	res, _ := h.run(t, ctx)
	if res.Outcome != Interrupted {
		t.Fatalf("got %+v, want interrupted (rank 0 runs until the test ends it)\n%s", res, h.out)
	}
	if !<-childGone {
		t.Error("rank 1's child outlived rank 1 while the gang ran")
	}
	kills.check(t)
}
