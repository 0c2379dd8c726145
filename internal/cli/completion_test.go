package cli

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// complete returns what the shells' completion offers for args (cobra's __complete), one
// value a line, without the directive.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errOut := trainyard(append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d: %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[:len(lines)-1] // the last line is the directive
}

// Completion offers the values of enumerated flags, the runs under --storage-path and the
// server's jobs by name and ID.
func TestCompletion(t *testing.T) {
	storage := t.TempDir()
	makeRun(t, storage, "fashion-mnist", v1.PhaseSucceeded, time.Hour)
	makeRun(t, storage, "resnet", v1.PhaseRunning, time.Minute)

	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	code, out, _ := trainyard("submit", "--no-wait", "--name", "hello", "--", "sh", "-c", "echo hi")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("submit: exit %d", code)
	}

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"list", "-o", ""}, "json yaml wide"},
		{[]string{"get", "--output", ""}, "json yaml"},
		{[]string{"--log-level", ""}, "debug info warn error"},
		{[]string{"results", "--storage-path", storage, ""}, "fashion-mnist hello " + id + " resnet"}, // a server job's results too
		{[]string{"tensorboard", "--storage-path", storage, ""}, "fashion-mnist resnet"},
		{[]string{"stop", ""}, "hello " + id},
		{[]string{"logs", "--storage-path", storage, ""}, "fashion-mnist hello " + id + " resnet"},
		{[]string{"get", id, ""}, ""}, // one argument only
		{[]string{"stop", "--address", "127.0.0.1:1", ""}, ""},
	}
	for _, c := range cases {
		if got := strings.Join(complete(t, c.args...), " "); got != c.want {
			t.Errorf("trainyard %s<TAB>: %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
}
