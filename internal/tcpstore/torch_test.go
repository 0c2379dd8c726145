package tcpstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// python finds a Python with torch.distributed, or skips the test.
func python(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if v := os.Getenv("TRAINYARD_TEST_PYTHON"); v != "" {
		py = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := exec.CommandContext(ctx, py, "-c", "import torch.distributed as d; assert d.is_available()").Run(); err != nil {
		t.Skipf("no torch.distributed in %s (%v): make test installs Debian's python3-torch", py, err)
	}
	return py
}

func runPython(t *testing.T, py, script string, env ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", script)
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

const clientScript = `
import datetime, os, threading, time
import torch, torch.distributed as dist
host, port = os.environ["STORE_HOST"], int(os.environ["STORE_PORT"])
timeout = datetime.timedelta(seconds=60)
s = dist.TCPStore(host, port, 1, False, timeout)
s.set("a", "1")
assert s.get("a") == b"1", s.get("a")
assert s.add("n", 2) == 2
assert s.add("n", 3) == 5
assert s.get("n") == b"5"
assert s.compare_set("c", "", "x") == b"x"
assert s.compare_set("c", "x", "y") == b"y"
assert s.compare_set("c", "z", "w") == b"y"
assert s.num_keys() >= 3, s.num_keys()
assert s.delete_key("a")
assert not s.delete_key("a")
other = dist.TCPStore(host, port, 1, False, timeout)
threading.Thread(target=lambda: (time.sleep(0.2), other.set("late", "v"))).start()
s.wait(["n", "late"])
assert s.get("late") == b"v"
try:
    s.wait(["never"], datetime.timedelta(milliseconds=300))
    raise SystemExit("wait for a key never set returned")
except RuntimeError as e:
    pass
print("client ok", torch.__version__)
`

// TestTorchClient: torch's own TCPStore client (as a rank's is_master=False store) sets,
// gets, adds, compares and sets, deletes and waits, with a timeout, on our server.
func TestTorchClient(t *testing.T) {
	py := python(t)
	s := listen(t, Limits{})
	out, err := runPython(t, py, clientScript, "STORE_HOST=127.0.0.1", "STORE_PORT="+strconv.Itoa(s.Port()))
	if err != nil {
		t.Fatalf("torch's client failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

const rankScript = `
import os, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
assert t.item() == 3.0, t
dist.barrier()
dist.destroy_process_group()
print("rank", os.environ["RANK"], "all_reduce", t.item())
`

// TestTorchProcessGroup: two ranks meet in a gloo process group through env:// with
// TORCHELASTIC_USE_AGENT_STORE=True (every rank a client of our store), twice, with a
// Reset between the attempts as the launcher does before a restart.
func TestTorchProcessGroup(t *testing.T) {
	py := python(t)
	s := listen(t, Limits{})
	for attempt := range 2 {
		if attempt > 0 {
			s.Reset()
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		outs := make([][]byte, 2)
		for rank := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[rank], errs[rank] = runPython(t, py, rankScript, "MASTER_ADDR=127.0.0.1",
					"MASTER_PORT="+strconv.Itoa(s.Port()), "WORLD_SIZE=2", fmt.Sprintf("RANK=%d", rank),
					"TORCHELASTIC_USE_AGENT_STORE=True", fmt.Sprintf("TORCHELASTIC_RESTART_COUNT=%d", attempt),
					"OMP_NUM_THREADS=1")
			}()
		}
		wg.Wait()
		for rank, err := range errs {
			if err != nil {
				t.Fatalf("attempt %d, rank %d: %v\n%s", attempt, rank, err, outs[rank])
			}
			t.Logf("attempt %d: %s", attempt, outs[rank])
		}
	}
}
