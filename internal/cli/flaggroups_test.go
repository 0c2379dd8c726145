package cli

import (
	"regexp"
	"strings"
	"testing"
)

// submit --help lists the common flags first, then each group under its heading, in order,
// and every flag once.
func TestSubmitHelpGroupsFlags(t *testing.T) {
	code, out, _ := trainyard("submit", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	last := 0
	for _, heading := range []string{"\nFlags:\n", "\nFaults and checkpoints:\n", "\nCode from git:\n", "\nThe job server:\n",
		"\nKubernetes (with --kube):\n", "\nGlobal Flags:\n"} {
		i := strings.Index(out, heading)
		if i < last {
			t.Fatalf("%q missing or out of order in:\n%s", heading, out)
		}
		last = i
	}
	flags, _ := strings.CutPrefix(out[strings.Index(out, "\nFlags:\n"):], "\n")
	listed := func(text, flag string) int { // lines that begin with the flag
		return len(regexp.MustCompile(`(?m)^\s+(-\w, )?`+regexp.QuoteMeta(flag)+`\b`).FindAllString(text, -1))
	}
	for _, f := range []string{"--workers", "--max-restarts", "--sync-source", "--address", "--kube", "--queue"} {
		if n := listed(flags, f); n != 1 {
			t.Errorf("%s listed %d times", f, n)
		}
	}
	common := flags[:strings.Index(flags, "\nFaults and checkpoints:")]
	if listed(common, "--workers") != 1 || listed(common, "--kube") != 0 {
		t.Errorf("the common flags:\n%s", common)
	}
}
