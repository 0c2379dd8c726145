package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// containerd is a standalone containerd of the test's own: its root, state, sockets and
// every other folder under dir, so it never meets the system's or the test cluster's.
type containerd struct {
	dir  string
	sock string
	cmd  *exec.Cmd
	done chan struct{}
}

// containerdConfig keeps everything under dir. restrict_oom_score_adj: these VMs refuse a
// negative oom_score_adj (see /work/shared/notes/real-cluster.md).
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = %[6]q
`

// startContainerd starts Debian's containerd under dir and waits until ctr reaches it;
// it is stopped, and its mounts and shims cleaned, when the test ends.
func startContainerd(t *testing.T, dir string) *containerd {
	t.Helper()
	c := &containerd{dir: dir, sock: filepath.Join(dir, "containerd.sock"), done: make(chan struct{})}
	config := fmt.Sprintf(containerdConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"),
		c.sock, c.sock+".ttrpc", filepath.Join(dir, "opt"), filepath.Join(dir, "net.d"))
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command("containerd", "--config", configPath)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start containerd (apt-get install containerd): %v", err)
	}
	go func() { c.cmd.Wait(); logFile.Close(); close(c.done) }()
	t.Cleanup(c.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ctr(context.Background(), "version"); err == nil {
			return c
		}
		select {
		case <-c.done:
			t.Fatalf("containerd exited: %v; its log:\n%s", c.cmd.ProcessState, readTail(filepath.Join(dir, "containerd.log")))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not answer on %s in 30 s; its log:\n%s", c.sock, readTail(filepath.Join(dir, "containerd.log")))
		}
	}
}

// ctr runs ctr against this containerd in the k8s.io namespace (the one kubelet uses).
func (c *containerd) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-a", c.sock, "-n", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// run runs image as container id with args (none: the image's own), its runc state, IO
// fifos and cgroup its own; detached, it returns once the task has started.
func (c *containerd) run(ctx context.Context, detach bool, image, id string, args ...string) (string, error) {
	mode := "--rm"
	if detach {
		mode = "-d"
	}
	flags := []string{"run", mode, "--cgroup", "/" + id,
		"--fifo-dir", filepath.Join(c.dir, "fifo"), "--runc-root", filepath.Join(c.dir, "runc"), image, id}
	return c.ctr(ctx, append(flags, args...)...)
}

// stop ends containerd (SIGTERM, then SIGKILL), then the shims it started, and detaches
// what is still mounted under its folder. Only processes of this containerd are touched.
// (containerd 1.6 puts its shims' sockets in /run/containerd/s whatever its config says;
// a shim removes its own when it ends.)
func (c *containerd) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	for _, pid := range shimsOf(c.sock) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	unmountUnder(c.dir)
}

// shimsOf lists the containerd shims whose command line names this containerd's socket.
func shimsOf(sock string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		for _, a := range args {
			if a == sock {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		_ = unix.Unmount(mp, unix.MNT_DETACH)
	}
}

func readTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
