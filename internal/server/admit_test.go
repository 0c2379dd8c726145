package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Only the folder made for a job is removed with it, never another job's.
func TestMadeFor(t *testing.T) {
	cases := map[string]struct {
		name, id string
		want     bool
	}{
		"its own folder":            {"raysubmit_a-1234567", "raysubmit_a", true},
		"a job whose ID extends it": {"a-1-1234567", "a", false},
		"another job":               {"b-1234567", "a", false},
		"no digits":                 {"a-", "a", false},
		"the ID alone":              {"a", "a", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := madeFor(c.name, c.id); got != c.want {
				t.Errorf("madeFor(%q, %q) = %v, want %v", c.name, c.id, got, c.want)
			}
		})
	}
}

func TestNewID(t *testing.T) {
	cases := map[string]struct {
		id      string
		wantErr bool
	}{
		"Ray's form":      {"raysubmit_0123456789abcdef", false},
		"dots and dashes": {"train.v2-run_1", false},
		"path":            {"../x", true},
		"space":           {"a b", true},
		"leading dash":    {"-x", true},
		"too long":        {string(make([]byte, 129)), true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := newID(c.id, "submission_id")
			if diff := cmp.Diff(c.wantErr, err != nil); diff != "" {
				t.Fatalf("error %v (-want +got):\n%s", err, diff)
			}
			if err == nil && got != c.id {
				t.Errorf("newID(%q) = %q", c.id, got)
			}
		})
	}
	if id, err := newID("", "id"); err != nil || !jobID.MatchString(id) {
		t.Errorf("generated ID %q, %v", id, err)
	}
}
