// Package host describes the machine a benchmark runs on and the processes it measures,
// from /proc: what every benchmark's report header and memory table need.
package host

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Field returns the value of the first "key: value" line of a /proc file, or "?".
func Field(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// CPU is the first "model name" of /proc/cpuinfo, or "?".
func CPU() string { return Field("/proc/cpuinfo", "model name") }

// Kernel is the kernel's release, or "?".
func Kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(data))
}

// MemTotalGiB is the machine's memory in GiB, as /proc/meminfo's MemTotal says, or "?".
func MemTotalGiB() string {
	var kb int64
	if _, err := fmt.Sscanf(Field("/proc/meminfo", "MemTotal"), "%d kB", &kb); err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

// LoadAverage is the 1, 5 and 15 minute load averages of /proc/loadavg, or "? ? ?".
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "? ? ?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Memory is a process's resident memory, in bytes.
type Memory struct {
	RSS, HWM int64 // VmRSS (now) and VmHWM (peak)
}

// ReadMemory reads a process's VmRSS and VmHWM from /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			m.RSS = kb << 10
		case "VmHWM":
			m.HWM = kb << 10
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, sc.Err()
}

// CopyFile copies src to dst with mode perm.
func CopyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// FreePort returns a loopback TCP port that nothing listened on a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
