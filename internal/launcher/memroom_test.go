package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path under root → content).
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The launcher finds its cgroup's memory limit and anonymous use: cgroup v1 (on the host,
// and in a container that sees its own cgroup at the mount) and v2 (the lowest limit from
// its cgroup up); no limit is none.
func TestCgroupMemory(t *testing.T) {
	const mib = 1 << 20
	v1stat := "cache 1000\nrss 5\nhierarchical_memory_limit 268435456\ntotal_cache 2000\ntotal_rss 104857600\n"
	cases := map[string]struct {
		files map[string]string
		want  memoryUse
		ok    bool
	}{
		"v1 on the host": {files: map[string]string{
			"proc/self/cgroup": "12:cpu,cpuacct:/a\n11:memory:/user.slice/job\n",
			"sys/fs/cgroup/memory/user.slice/job/memory.stat": v1stat,
		}, want: memoryUse{limit: 256 * mib, anon: 100 * mib}, ok: true},
		"v1 in a container": {files: map[string]string{
			"proc/self/cgroup":                 "11:memory:/kubepods/burstable/pod1/abc\n",
			"sys/fs/cgroup/memory/memory.stat": v1stat,
		}, want: memoryUse{limit: 256 * mib, anon: 100 * mib}, ok: true},
		"v1 without a limit": {files: map[string]string{
			"proc/self/cgroup":                 "11:memory:/\n",
			"sys/fs/cgroup/memory/memory.stat": "hierarchical_memory_limit 9223372036854771712\ntotal_rss 7\n",
		}, want: memoryUse{anon: 7}, ok: true},
		"v2, a parent's limit lower": {files: map[string]string{
			"proc/self/cgroup":              "0::/a/b\n",
			"sys/fs/cgroup/a/memory.max":    "536870912\n",
			"sys/fs/cgroup/a/b/memory.max":  "max\n",
			"sys/fs/cgroup/a/b/memory.stat": "anon 52428800\nfile 9\n",
			"sys/fs/cgroup/memory.max":      "1\n", // the root has none; never read
		}, want: memoryUse{limit: 512 * mib, anon: 50 * mib}, ok: true},
		"v2 without a limit": {files: map[string]string{
			"proc/self/cgroup":          "0::/\n",
			"sys/fs/cgroup/memory.stat": "anon 3\n",
		}, want: memoryUse{anon: 3}, ok: true},
		"no cgroup file": {files: map[string]string{}, ok: false},
		"a stat without the fields": {files: map[string]string{
			"proc/self/cgroup":                 "11:memory:/\n",
			"sys/fs/cgroup/memory/memory.stat": "cache 1\n",
		}, ok: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tc.files)
			got, ok := cgroupMemory(root)
			if got != tc.want || ok != tc.ok {
				t.Errorf("cgroupMemory = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// Spares start only when the limit leaves room for as much again as the ranks hold, and a
// margin; the refusal says how much there is and what to do.
func TestSpareRoom(t *testing.T) {
	const mib = 1 << 20
	if why := spareRoom(memoryUse{anon: 900 * mib}, 400*mib); why != "" {
		t.Errorf("no limit: %q", why)
	}
	if why := spareRoom(memoryUse{limit: 1024 * mib, anon: 300 * mib}, 250*mib); why != "" {
		t.Errorf("room for 250 MiB more and the margin: %q", why)
	}
	why := spareRoom(memoryUse{limit: 256 * mib, anon: 120 * mib}, 100*mib)
	for _, want := range []string{"the memory limit (256 MiB, 120 MiB in use) leaves 136 MiB", "need about 164 MiB", "raise the limit"} {
		if !strings.Contains(why, want) {
			t.Errorf("refusal %q lacks %q", why, want)
		}
	}
}

// A rank's anonymous memory comes from its status file; a process that is gone holds none.
func TestRSSAnon(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"proc/42/status": "Name:\tpython3\nVmRSS:\t  240000 kB\nRssAnon:\t  120000 kB\nRssFile:\t 120000 kB\n"})
	if got := rssAnon(root, 42); got != 120000<<10 {
		t.Errorf("rssAnon = %d", got)
	}
	if got := rssAnon(root, 43); got != 0 {
		t.Errorf("a gone process: %d", got)
	}
	if self := rssAnon("/", os.Getpid()); self <= 0 {
		t.Errorf("this test's own RssAnon = %d", self)
	}
}
