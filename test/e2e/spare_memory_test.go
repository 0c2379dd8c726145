package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// memoryCgroup makes a cgroup v1 memory cgroup limited to limit bytes and returns its
// folder; it is removed when the test ends. It skips where that cannot be done (not root,
// no cgroup v1 memory controller: a cgroup v2 machine).
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a memory cgroup needs root")
	}
	base := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(base, "memory.limit_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s (this test makes its cgroup there)", base)
	}
	dir := filepath.Join(base, fmt.Sprintf("trainyard-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if err := os.Remove(dir); err == nil || time.Now().After(deadline) {
				return // busy while the last processes exit
			}
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Spares never take the ranks' memory: under a memory limit that leaves no room for a
// second Python with torch, the launcher starts none and says why, and the restart
// imports torch afresh (a cgroup over its limit would have the rank killed); with room,
// the restart runs on one.
func TestSparesStayWithinTheMemoryLimit(t *testing.T) {
	needTorch(t)
	const mib = 1 << 20
	script := `import os, sys, time
import torch
print("imported", flush=True)
if os.environ["TRAINYARD_ATTEMPT"] == "1":
    time.sleep(4)  # the launcher starts its spare, or says why not
    sys.exit(3)
print("attempt 2 done", flush=True)
`
	for _, tc := range []struct {
		name  string
		limit int64
		want  string
		not   string
	}{
		{"256 MiB", 256 * mib, "attempt 1: no prestarted Pythons for the next attempt: the memory limit (256 MiB", "run on prestarted Pythons"},
		{"4 GiB", 4096 * mib, "attempt 2: 1 of 1 rank(s) run on prestarted Pythons", "no prestarted Pythons"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := memoryCgroup(t, tc.limit)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "fails_once.py"), []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg,
				binary, "run", "--max-restarts", "1", "--", python, "fails_once.py")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("trainyard run in a cgroup of %s: %v\n%s", tc.name, err, out)
			}
			if s := string(out); !strings.Contains(s, tc.want) || strings.Contains(s, tc.not) || !strings.Contains(s, "attempt 2 done") {
				t.Errorf("want %q and not %q, and attempt 2 done:\n%s", tc.want, tc.not, s)
			}
			b, _ := os.ReadFile(filepath.Join(cg, "memory.max_usage_in_bytes"))
			peak, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			t.Logf("the cgroup's peak use: %d MiB", peak/mib)
		})
	}
}
