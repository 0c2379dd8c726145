package checkpoint

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// commitWithMetrics commits one sample checkpoint per metrics value, in order.
func commitWithMetrics(t *testing.T, s *Store, metrics []Metrics) {
	t.Helper()
	parent := t.TempDir()
	for i, m := range metrics {
		if _, err := s.Commit(writeCheckpoint(t, parent, i+1), Meta{Iteration: i + 1, Metrics: m}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetain(t *testing.T) {
	acc := func(v float64) Metrics { return Metrics{"acc": v, "loss": 1 - v} }
	five := []Metrics{acc(0.5), acc(0.9), acc(0.7), acc(0.8), acc(0.1)}
	cases := map[string]struct {
		metrics     []Metrics
		policy      Policy
		wantDeleted []string
		wantErr     string
	}{
		"keep all": {
			metrics: five, policy: Policy{Keep: 0},
		},
		"recency keeps the 2 newest": {
			metrics: five, policy: Policy{Keep: 2},
			wantDeleted: []string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000003"},
		},
		"recency keep more than there are": {
			metrics: five, policy: Policy{Keep: 9},
		},
		"max score keeps the best 2 and the latest": {
			metrics: five, policy: Policy{Keep: 2, Score: "acc", Order: "max"},
			wantDeleted: []string{"checkpoint_000001", "checkpoint_000003"},
		},
		"max is the default order": {
			metrics: five, policy: Policy{Keep: 1, Score: "acc"},
			wantDeleted: []string{"checkpoint_000001", "checkpoint_000003", "checkpoint_000004"},
		},
		"min score keeps the lowest loss": {
			metrics: five, policy: Policy{Keep: 1, Score: "loss", Order: "min"},
			wantDeleted: []string{"checkpoint_000001", "checkpoint_000003", "checkpoint_000004"},
		},
		"min score, latest is best": {
			metrics: five, policy: Policy{Keep: 2, Score: "acc", Order: "min"},
			wantDeleted: []string{"checkpoint_000002", "checkpoint_000003", "checkpoint_000004"},
		},
		"NaN ranks last": {
			metrics:     []Metrics{{"loss": math.NaN()}, {"loss": 3}, {"loss": 2}, {"loss": 5}},
			policy:      Policy{Keep: 1, Score: "loss", Order: "min"},
			wantDeleted: []string{"checkpoint_000001", "checkpoint_000002"},
		},
		"missing score metric is kept and reported": {
			metrics:     []Metrics{{"loss": 1, "accuracy": 0.1}, {"acc": 0.2}, {"acc": 0.3}, {"loss": 0.5}, {"acc": 0.1}},
			policy:      Policy{Keep: 1, Score: "acc"},
			wantDeleted: []string{"checkpoint_000002"},
			wantErr: `--checkpoint-score acc: reports have no metric "acc" (they have: accuracy, loss); ` +
				"keeping checkpoint_000001, checkpoint_000004",
		},
		"no metrics at all": {
			metrics: []Metrics{nil, nil}, policy: Policy{Keep: 1, Score: "acc"},
			wantErr: `--checkpoint-score acc: reports have no metric "acc" (they have no metrics); ` +
				"keeping checkpoint_000001, checkpoint_000002",
		},
		"bad order": {
			metrics: five, policy: Policy{Keep: 1, Score: "acc", Order: "best"},
			wantErr: `checkpoint score order must be "max" or "min", got "best"`,
		},
		"negative keep": {
			metrics: five, policy: Policy{Keep: -1},
			wantErr: "checkpoints to keep must be 0 (all) or more, got -1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			commitWithMetrics(t, s, tc.metrics)
			before := listNames(t, s)
			deleted, err := s.Retain(tc.policy)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("Retain error = %q, want %q", got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantDeleted, deleted); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(without(before, tc.wantDeleted), listNames(t, s)); diff != "" {
				t.Errorf("List after Retain (-want +got):\n%s", diff)
			}
			if got := stagingEntries(t, s); len(got) != 0 {
				t.Errorf("Retain left %v in .staging", got)
			}
		})
	}
}

func TestRetainScoreErrorType(t *testing.T) {
	s := openStore(t)
	commitWithMetrics(t, s, []Metrics{{"loss": 1}, {"loss": 2}})
	_, err := s.Retain(Policy{Keep: 1, Score: "acc"})
	var score *ScoreError
	if !errors.As(err, &score) || score.Metric != "acc" || !cmp.Equal(score.Have, []string{"loss"}) {
		t.Errorf("Retain error %v, want a *ScoreError for acc", err)
	}
}

// The latest checkpoint that has its files is kept even when it scores worst, and a newer
// damaged one does not take its place.
func TestRetainKeepsLatestIntact(t *testing.T) {
	s := openStore(t)
	commitWithMetrics(t, s, []Metrics{{"acc": 0.9}, {"acc": 0.8}, {"acc": 0.1}, {"acc": 0.5}})
	must(t, os.Remove(filepath.Join(s.Dir(), "checkpoint_000004", "model.pt")))
	deleted, err := s.Retain(Policy{Keep: 1, Score: "acc"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"checkpoint_000002", "checkpoint_000004"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	latest, _, err := s.Latest()
	if err != nil || latest.Name != "checkpoint_000003" {
		t.Errorf("Latest after Retain = %s, %v; want checkpoint_000003", latest.Name, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// without returns list without the names in drop.
func without(list, drop []string) []string {
	var out []string
	for _, n := range list {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}
