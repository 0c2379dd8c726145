package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/shell"
)

// TestRank0 checks which stdout lines count as rank 0's for each launcher.
func TestRank0(t *testing.T) {
	cases := []struct {
		rank0 func(string) (string, bool)
		line  string
		want  string
		ok    bool
	}{
		{trainyardRank0, "[rank 0 pid 42] step 3 time 0.0100 loss 2.3000", "step 3 time 0.0100 loss 2.3000", true},
		{trainyardRank0, "[rank 1 pid 43] step 3 time 0.0100 loss 2.3000", "", false},
		{trainyardRank0, "[rank 10 pid 44] x", "", false},
		{trainyardRank0, "trainyard: attempt 1: starting", "", false},
		{torchrunRank0, "step 3 time 0.0100 loss 2.3000", "step 3 time 0.0100 loss 2.3000", true},
		{torchrunRank0, "[default0]:first step done", "first step done", true},
		{torchrunRank0, "[default1]:step 3 time 0.0100 loss 2.3000", "", false},
	}
	for _, c := range cases {
		got, ok := c.rank0(c.line)
		if got != c.want || ok != c.ok {
			t.Errorf("rank0(%q) = %q, %v; want %q, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// TestParseStep checks the step line parser, including a folded console line.
func TestParseStep(t *testing.T) {
	step, secs, ok := parseStep("step 21 time 0.0123 loss 1.9000")
	if !ok || step != 21 || secs != 0.0123 {
		t.Errorf("parseStep = %d, %v, %v", step, secs, ok)
	}
	if _, _, ok := parseStep("step 21 time 0.0123 loss 1.9000 [repeated 1x across workers]"); ok {
		t.Error("a folded summary line parsed as a step")
	}
}

// TestMedian checks odd and even counts.
func TestMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
}

// TestParseStat checks a stat line whose command name holds spaces and parentheses.
func TestParseStat(t *testing.T) {
	st, err := parseStat("123 (a (b) c) S 7 123 123 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9876 0 0")
	if err != nil || st.pid != 123 || st.ppid != 7 || st.startTime != 9876 {
		t.Errorf("parseStat = %+v, %v", st, err)
	}
	self, err := readStat(os.Getpid())
	if err != nil || self.ppid != os.Getppid() {
		t.Errorf("readStat(self) = %+v, %v", self, err)
	}
}

// TestShellQuote checks quoting of the printed command line.
func TestShellQuote(t *testing.T) {
	if got := shell.Quote("./bin/trainyard"); got != "./bin/trainyard" {
		t.Errorf("shellQuote plain = %s", got)
	}
	if got := shell.Quote("a b'c"); got != `'a b'\''c'` {
		t.Errorf("shellQuote = %s", got)
	}
}

// -kinds and -torchrun-rdzv take only what they name, and say what to give otherwise.
func TestParseFlagsKindsAndRendezvous(t *testing.T) {
	cfg, err := parseFlags([]string{"-kinds", "restart", "-torchrun-rdzv", "c10d"})
	if err != nil || len(cfg.kinds) != 1 || cfg.kinds[0] != restartRun || cfg.rdzv != "c10d" {
		t.Fatalf("parseFlags = %+v, %v; want restart trials only and c10d", cfg, err)
	}
	argv := torchrunArgv(cfg, "/d", "29501", 1, []string{"train.py"})
	if got := strings.Join(argv, " "); !strings.Contains(got, "--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29501") || strings.Contains(got, "--master_port") {
		t.Errorf("torchrun argv with c10d = %s", got)
	}
	for _, bad := range [][]string{{"-kinds", "walk"}, {"-torchrun-rdzv", "etcd"}} {
		if _, err := parseFlags(bad); err == nil || !strings.Contains(err.Error(), "give") {
			t.Errorf("parseFlags(%q) = %v, want an error saying what to give", bad, err)
		}
	}
}

// The bare launcher starts every rank with torchrun's variables and a store that
// listens before they start, prefixes their lines as trainyard's console does, and
// exits 1 when a rank fails.
func TestRunBare(t *testing.T) {
	script := `echo "rank=$RANK of $WORLD_SIZE agent_store=$TORCHELASTIC_USE_AGENT_STORE"; ` +
		`exec 3<>/dev/tcp/$MASTER_ADDR/$MASTER_PORT && echo store-up`
	var out, errs strings.Builder
	if code := runBare([]string{"/bin/bash", "-c", script}, &out, &errs); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
	for rank := range ranks {
		want := fmt.Sprintf("rank=%d of %d agent_store=True", rank, ranks)
		line := regexp.MustCompile(fmt.Sprintf(`(?m)^\[rank %d pid \d+\] %s$`, rank, want))
		if !line.MatchString(out.String()) {
			t.Errorf("no line %q from rank %d in %q", want, rank, out.String())
		}
	}
	if n := strings.Count(out.String(), "] store-up"); n != ranks {
		t.Errorf("%d ranks reached the store, want %d: %q", n, ranks, out.String())
	}
	errs.Reset()
	if code := runBare([]string{"/bin/bash", "-c", `[ "$RANK" = 0 ] || exit 3`}, &out, &errs); code != 1 ||
		!strings.Contains(errs.String(), "rank 1: exit status 3") {
		t.Errorf("a failing rank: exit %d, stderr %q; want 1 and rank 1's status", code, errs.String())
	}
}

// The bare launcher refuses a command line without a script, and says which Python it
// could not start; neither starts a rank.
func TestRunBareRefuses(t *testing.T) {
	var out, errs strings.Builder
	if code := runBare([]string{"/usr/bin/python3"}, &out, &errs); code != 2 ||
		errs.String() != "usage: launch -bare-ranks PYTHON SCRIPT [ARG...]\n" || out.Len() != 0 {
		t.Errorf("no script: exit %d, stdout %q, stderr %q; want 2 and the usage", code, out.String(), errs.String())
	}
	errs.Reset()
	if code := runBare([]string{"/nonexistent/python", "train.py"}, &out, &errs); code != 1 ||
		!strings.Contains(errs.String(), "start rank 0: fork/exec /nonexistent/python: no such file or directory") || out.Len() != 0 {
		t.Errorf("a missing Python: exit %d, stdout %q, stderr %q; want 1 and what could not start", code, out.String(), errs.String())
	}
}
