package testcluster

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// kubepodsCgroups lists the cgroup folders kubelet made under kubepods (a path below
// the hierarchies' root: "kubepods" for the first node, "trainyard-node-2/kubepods" for
// the second; cgroupfs driver, cgroup v1), deepest first.
func kubepodsCgroups(kubepods string) []string {
	var dirs []string
	hierarchies, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", kubepods))
	for _, h := range hierarchies {
		_ = filepath.WalkDir(h, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killPods SIGKILLs every process in a kubelet's pod cgroups (kubepods, as
// kubepodsCgroups takes it) until none is left (or 10 s pass), then removes the cgroups.
func killPods(kubepods string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		for _, d := range kubepodsCgroups(kubepods) {
			for _, pid := range cgroupProcs(d) {
				found = true
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if !found || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range kubepodsCgroups(kubepods) {
		_ = os.Remove(d)
	}
}

func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below one of the prefixes, deepest first.
func unmountUnder(prefixes ...string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, p := range prefixes {
			if mp == p || strings.HasPrefix(mp, p+"/") {
				points = append(points, mp)
				break
			}
		}
	}
	f.Close()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		_ = unix.Unmount(mp, unix.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeOutside removes what kubelet, containerd and CNI write outside the cluster's root
// whatever their flags say: device-plugin sockets, pod log links into root, CNI results
// of our network, and the shims' sockets (unless a system containerd runs).
func removeOutside(root string) {
	_ = os.RemoveAll("/var/lib/kubelet/device-plugins")
	_ = os.Remove("/var/lib/kubelet")
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, root) {
			_ = os.Remove(l)
		}
	}
	results, _ := filepath.Glob("/var/lib/cni/results/trainyard-testcluster-*")
	for _, r := range results {
		_ = os.Remove(r)
	}
	if _, err := os.Stat("/run/containerd/containerd.sock"); err != nil {
		// No system containerd whose shims' sockets these could be.
		_ = os.RemoveAll("/run/containerd/s")
	}
}
