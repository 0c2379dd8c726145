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

// A local user's job server with --prestart keeps its standby and the standby's Pythons
// to that user: another local user can read neither the Pythons' environment nor the
// standby's open files nor its log, and cannot signal them; the user's next job runs on
// those Pythons all the same.
func TestServerPrestartAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a job server as one local user and looks at it as another (useradd, runuser)")
	}
	needTorch(t)
	for _, u := range []string{swapRunner, swapMallory} {
		ensureUser(t, u)
	}
	base := swapBase(t)
	home := filepath.Join(base, "home-"+swapRunner)
	t.Cleanup(func() { _ = exec.Command("pkill", "-KILL", "-u", swapRunner).Run() })
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	server := startAs(t, base, swapRunner, "server", "--prestart", "--address", addr,
		"--state-dir", filepath.Join(home, "state"), "--storage-path", filepath.Join(home, "runs"))
	waitHealthy(t, "http://"+addr, server.out)
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	submit := func() string {
		t.Helper()
		ty := startAs(t, base, swapRunner, "submit", "--address", "http://"+addr, "--workdir", home, "--workers", "2", "--",
			python, script, "--epochs", "1", "--train-subset", "640", "--test-subset", "200")
		err := ty.cmd.Wait()
		if out := ty.out.String(); err != nil || !strings.Contains(out, "done: final test_accuracy") {
			t.Fatalf("submit as %s: %v, want a trained model:\n%s\nserver:\n%s", swapRunner, err, out, server.out)
		}
		return ty.out.String()
	}
	submit()
	standby, spares := waitStandby(t, home, 2, time.Minute)

	log := filepath.Join(home, "state", "standby.log")
	if fi, err := os.Stat(log); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v; want 0600", log, err, fi.Mode())
	}
	for _, c := range []struct {
		what string
		argv []string
	}{
		{"read a waiting Python's environment", []string{"cat", fmt.Sprintf("/proc/%d/environ", spares[0])}},
		{"list the standby's open files", []string{"ls", fmt.Sprintf("/proc/%d/fd", standby)}},
		{"read the standby's log", []string{"cat", log}},
		{"signal the standby", []string{"kill", "-0", strconv.Itoa(standby)}},
		{"signal a waiting Python", []string{"kill", "-0", strconv.Itoa(spares[1])}},
	} {
		// The owner can; another user cannot.
		if out, err := asUser(swapRunner, c.argv...); err != nil {
			t.Errorf("%s could not %s: %v\n%s", swapRunner, c.what, err, out)
		}
		out, err := asUser(swapMallory, c.argv...)
		t.Logf("as %s, %s: %v: %s", swapMallory, c.what, err, strings.TrimSpace(out))
		if err == nil {
			t.Errorf("%s could %s of %s's server:\n%s", swapMallory, c.what, swapRunner, out)
		}
	}

	if out := submit(); !strings.Contains(out, "attempt 1: 2 of 2 rank(s) run on prestarted Pythons") {
		t.Errorf("%s's second job did not run on the standby's Pythons:\n%s", swapRunner, out)
	}
}

// asUser runs argv as the local user name (runuser, bash for its kill builtin).
func asUser(name string, argv ...string) (string, error) {
	cmd := exec.Command("runuser", "-u", name, "--", "bash", "-c", `"$@"`, "bash")
	cmd.Args = append(cmd.Args, argv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
