package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Spares must not cost a rank its memory. A pod's memory limit (and a local run's, under a
// systemd slice or another cgroup with one) is the user's budget for the training: each
// spare holds what `import torch` allocates (about 117 MB of anonymous memory with torch
// 1.13 on CPU), and a cgroup over its limit has its largest process killed, the rank.
// So the launcher starts the next attempt's spares only when the cgroup's limit, less the
// anonymous memory it holds, leaves room for as much again as its ranks hold now (their
// imports done: a spare grows no larger before it runs its rank) and a margin.

// spareMargin is the room a cgroup keeps beyond the spares' estimate: its page cache and
// the ranks' growth while they train.
const spareMargin = 64 << 20

// memoryUse is a cgroup's memory limit and the anonymous memory its processes hold, in
// bytes; limit is 0 when it has none.
type memoryUse struct {
	limit, anon int64
}

// spareRoom says why the spares of ranks holding ranksAnon bytes would not fit in use,
// or "" when they fit (or there is no limit).
func spareRoom(use memoryUse, ranksAnon int64) string {
	if use.limit <= 0 {
		return ""
	}
	free := use.limit - use.anon
	if need := ranksAnon + spareMargin; free < need {
		return fmt.Sprintf("the memory limit (%d MiB, %d MiB in use) leaves %d MiB, and they need about %d MiB "+
			"(what the ranks hold, and %d MiB to spare); raise the limit to restart faster",
			use.limit>>20, use.anon>>20, free>>20, need>>20, spareMargin>>20)
	}
	return ""
}

// cgroupMemory reads the memory limit and anonymous use of the cgroup this process is in,
// under root ("/" but in tests): cgroup v1's memory controller (hierarchical_memory_limit
// and total_rss, so a parent's lower limit counts) or v2's (the lowest memory.max from the
// cgroup up, and anon). A container sees its own cgroup at the controller's mount, where
// /proc/self/cgroup names a path of the host's. ok is false when it cannot tell.
func cgroupMemory(root string) (use memoryUse, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return memoryUse{}, false
	}
	v1, v2 := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1 = parts[2]
		}
	}
	switch {
	case v1 != "":
		return cgroupV1Memory(ownCgroup(filepath.Join(root, "sys/fs/cgroup/memory"), v1))
	case v2 != "":
		return cgroupV2Memory(filepath.Join(root, "sys/fs/cgroup"), v2)
	}
	return memoryUse{}, false
}

// ownCgroup is the folder of cgroup path under a controller's mount, or the mount itself
// when that path is not there (a container's view).
func ownCgroup(mount, path string) string {
	dir := filepath.Join(mount, path)
	if _, err := os.Stat(dir); err != nil {
		return mount
	}
	return dir
}

// unlimited is past any machine's memory: cgroup v1 reports no limit as about 2^63.
const unlimited = 1 << 60

func cgroupV1Memory(dir string) (memoryUse, bool) {
	stat, err := readStat(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return memoryUse{}, false
	}
	limit, okL := stat["hierarchical_memory_limit"]
	anon, okA := stat["total_rss"]
	if !okL || !okA {
		return memoryUse{}, false
	}
	if limit >= unlimited {
		limit = 0
	}
	return memoryUse{limit: limit, anon: anon}, true
}

func cgroupV2Memory(mount, path string) (memoryUse, bool) {
	dir := ownCgroup(mount, path)
	stat, err := readStat(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return memoryUse{}, false
	}
	anon, ok := stat["anon"]
	if !ok {
		return memoryUse{}, false
	}
	var limit int64
	for d := dir; strings.HasPrefix(d, mount) && d != mount; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "memory.max"))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && (limit == 0 || v < limit) {
			limit = v // "max" does not parse: no limit there
		}
	}
	return memoryUse{limit: limit, anon: anon}, true
}

// readStat reads a "name value" file (memory.stat).
func readStat(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(val, 10, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// rssAnon is the anonymous memory process pid holds (RssAnon in /proc/<pid>/status), in
// bytes, under root; 0 when it cannot be read (the process is gone).
func rssAnon(root string, pid int) int64 {
	b, err := os.ReadFile(filepath.Join(root, "proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
