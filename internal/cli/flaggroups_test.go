package cli

import (
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
	for _, f := range []string{"--workers N|MIN:MAX", "--max-restarts", "--sync-source", "--address", "--kube ", "--queue"} {
		if n := strings.Count(flags, f); n != 1 {
			t.Errorf("%s listed %d times", f, n)
		}
	}
	common := flags[:strings.Index(flags, "\nFaults and checkpoints:")]
	if !strings.Contains(common, "--workers N|MIN:MAX") || strings.Contains(common, "--kube ") {
		t.Errorf("the common flags:\n%s", common)
	}
}
