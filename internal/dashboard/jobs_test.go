package dashboard

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/client"
)

func TestReadListQuery(t *testing.T) {
	lq, err := readListQuery(url.Values{"status": {"running"}, "q": {" mnist "}, "sort": {"name"}, "page": {"3"}})
	if err != nil || lq != (listQuery{Status: "RUNNING", Search: "mnist", Sort: "name", Page: 3}) {
		t.Errorf("got %+v, %v", lq, err)
	}
	for _, bad := range []url.Values{{"status": {"done"}}, {"sort": {"size"}}, {"page": {"0"}}, {"page": {"x"}}} {
		if _, err := readListQuery(bad); err == nil {
			t.Errorf("%v accepted", bad)
		} else if !strings.Contains(err.Error(), "choose") && !strings.Contains(err.Error(), "whole number") {
			t.Errorf("%v: the error does not say what to use: %v", bad, err)
		}
	}
	if got := lq.link("page", "4"); got != "/?page=4&q=mnist&sort=name&status=RUNNING" {
		t.Errorf("link = %q", got)
	}
}

// The compare page lists the settings that differ, not the run's own name.
func TestDifferences(t *testing.T) {
	specs := make([]map[string]string, 2)
	for i, doc := range []any{
		map[string]any{"runName": "a", "command": []any{"python3", "train.py", "--lr", "0.1"}, "workers": 2.0,
			"args": []any{"-c", "print(1 < 2 & 3 > 2)"}, "workingDir": ""},
		map[string]any{"runName": "b", "command": []any{"python3", "train.py", "--lr", "0.2"}, "workers": 2.0, "maxRestarts": 3.0,
			"args": []any{"-c", "print('<b>')"}},
	} {
		specs[i] = map[string]string{}
		flatten("", doc, specs[i])
	}
	got := differences(specs)
	// Strings as they are, not JSON-escaped (\u003c); an empty one as "" (unset is "").
	want := []configDiff{{Key: "args[1]", Values: []string{"print(1 < 2 & 3 > 2)", "print('<b>')"}},
		{Key: "command[3]", Values: []string{"0.1", "0.2"}}, {Key: "maxRestarts", Values: []string{"", "3"}},
		{Key: "workingDir", Values: []string{`""`, ""}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The machine's history keeps the last samples, oldest first.
func TestHistory(t *testing.T) {
	h := newHistory(3)
	for i := range 5 {
		h.add(sample{GPUsAllocated: int64(i)})
	}
	var got []int64
	for _, s := range h.all() {
		got = append(got, s.GPUsAllocated)
	}
	if !cmp.Equal(got, []int64{2, 3, 4}) {
		t.Errorf("history %v", got)
	}
}

// A job that reports total_iterations shows how far it is and when it should end.
func TestProgress(t *testing.T) {
	r := &client.Result{Iteration: 25, TimeTotalS: 50, Metrics: client.Metrics{TotalMetric: 100, "loss": 1}}
	if p := progressOf(r); p == nil || p.Percent != 25 || p.ETA != "2m30s left" {
		t.Errorf("progress %+v, want 25%% and 2m30s left (75 iterations of 2s)", p)
	}
	if progressOf(&client.Result{Iteration: 3, Metrics: client.Metrics{"loss": 1}}) != nil || progressOf(nil) != nil {
		t.Error("a job without total_iterations has a progress")
	}
	if p := progressOf(&client.Result{Iteration: 120, TimeTotalS: 10, Metrics: client.Metrics{TotalMetric: 100}}); p.Percent != 100 || p.ETA != "" {
		t.Errorf("past the total: %+v", p)
	}
}

// The pages' templates parse, with every function they use.
func TestNewParsesThePages(t *testing.T) {
	if _, err := New(Config{Backend: nil, Token: "t"}); err == nil {
		t.Error("a dashboard without a backend was made")
	}
	if _, err := New(Config{Backend: struct{ Backend }{}, Token: "t"}); err != nil {
		t.Fatalf("New: %v", err)
	}
}
