package launcher

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// storeScript records, for each rank and attempt, TORCHELASTIC_USE_AGENT_STORE, MASTER_PORT
// and whether something listened on it when the rank started; rank 1 fails attempt 1 once
// rank 0 wrote its record.
const storeScript = `listening=no
bash -c "exec 3<>/dev/tcp/127.0.0.1/$MASTER_PORT" 2>/dev/null && listening=yes
echo "$TORCHELASTIC_USE_AGENT_STORE $MASTER_PORT $listening" > store-$RANK-$TRAINYARD_ATTEMPT
if [ "$RANK" = 1 ] && [ "$TRAINYARD_ATTEMPT" = 1 ]; then
  while [ ! -s store-0-1 ]; do sleep 0.05; done # rank 0 has written its record
  exit 1
fi`

// readStoreRecords returns what storeScript wrote, by rank-attempt.
func readStoreRecords(t *testing.T, dir string) map[string][]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "store-*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(filepath.Base(p), "store-")] = strings.Fields(string(data))
	}
	return out
}

func TestStoreHostedBeforeRanksAndReused(t *testing.T) {
	job := makeJob(t, storeScript).workers(2).restarts(1).obj(t)
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Succeeded || res.Attempts != 2 {
		t.Fatalf("got %+v, want success in attempt 2\n%s", res, h.out)
	}
	got := readStoreRecords(t, job.Spec.WorkingDir)
	port := got["0-1"][1]
	want := map[string][]string{}
	for _, k := range []string{"0-1", "1-1", "0-2", "1-2"} {
		want[k] = []string{"True", port, "yes"}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent store, port and listener seen by each rank-attempt (-want +got):\n%s", diff)
	}
	if !strings.Contains(h.out.String(), "(hosted by trainyard)") {
		t.Errorf("the attempt's notice does not say who hosts the rendezvous:\n%s", h.out)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 10*time.Second); err == nil {
		c.Close()
		t.Errorf("the store still listens on %s after the run", port)
	}
}

func TestStoreOptOut(t *testing.T) {
	cases := map[string]v1.EnvVar{
		"agent store off": {Name: AgentStoreEnv, Value: "False"},
		"own MASTER_PORT": {Name: "MASTER_PORT", Value: "0"},
	}
	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			b := makeJob(t, storeScript)
			b.job.Spec.Env = append(b.job.Spec.Env, env)
			job := b.workers(2).restarts(1).obj(t)
			if AgentStoreWanted(job) {
				t.Fatal("AgentStoreWanted = true, want false")
			}
			h := newHarness(t, job)
			if res, _ := h.run(t, context.Background()); res.Outcome != Succeeded {
				t.Fatalf("got %+v\n%s", res, h.out)
			}
			for k, rec := range readStoreRecords(t, job.Spec.WorkingDir) {
				if rec[0] == "True" || rec[len(rec)-1] != "no" {
					t.Errorf("rank-attempt %s saw %q: want no agent store and nothing listening", k, rec)
				}
			}
		})
	}
}

// blockedStoreScript has rank 0 of attempt 1 wait in a store call for a key that never
// comes, with a SIGTERM handler (which Python runs only once that call returns), while
// rank 1 fails once rank 0 waits.
const blockedStoreScript = `exec /usr/bin/python3 - <<'EOF'
import os, signal, sys, time
from datetime import timedelta
import torch.distributed as dist
rank, attempt = int(os.environ["RANK"]), int(os.environ["TRAINYARD_ATTEMPT"])
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                      timeout=timedelta(seconds=60))
if attempt == 1:
    if rank == 1:
        store.wait(["rank 0 waits"])
        time.sleep(0.5)
        sys.exit(3)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    store.set("rank 0 waits", "1")
    print("blocked at %.3f" % time.time(), flush=True)
    store.get("never set")
EOF`

// A rank blocked in a call to the launcher's store ends as soon as the gang stops, not at
// the grace period's SIGKILL: the store's connections are closed as the stop begins.
func TestStopClosesTheStore(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import torch.distributed").Run() != nil {
		t.Skip("/usr/bin/python3 cannot import torch (apt install python3-torch)")
	}
	job := makeJob(t, blockedStoreScript).workers(2).restarts(1).grace(30).obj(t)
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Succeeded || res.Attempts != 2 {
		t.Fatalf("got %+v, want success in attempt 2\n%s", res, h.out)
	}
	log, err := os.ReadFile(filepath.Join(h.l.Folder.Dir, "logs", "attempt-1", "rank-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`blocked at (\d+\.\d+)`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("rank 0 of attempt 1 did not wait in the store:\n%s\n%s", log, h.out)
	}
	sec, _ := strconv.ParseFloat(string(m[1]), 64)
	blocked := time.Unix(0, int64(sec*1e9))
	rank0 := h.l.Folder.Record().Attempts[0].Ranks[0]
	if rank0.Ended == nil {
		t.Fatalf("rank 0 of attempt 1 has no end: %+v", rank0)
	}
	if took := rank0.Ended.Sub(blocked); took > 10*time.Second || rank0.Signal == "SIGKILL" {
		t.Errorf("rank 0 of attempt 1 ended %s after it blocked in the store (signal %q), want well within the grace period (30s):\n%s",
			took.Round(time.Millisecond), rank0.Signal, log)
	}
}
