package cli

import (
	"strings"
	"testing"
)

// -o json of nothing is [], not null, in every command that lists things.
func TestJSONOfNothing(t *testing.T) {
	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	cases := map[string]struct {
		args []string
		want string // what the output holds
	}{
		"list":       {args: []string{"list", "-o", "json"}, want: "[]\n"},
		"list, YAML": {args: []string{"list", "-o", "yaml"}, want: "[]\n"},
		"top job":    {args: []string{"top", "job", "-o", "json"}, want: "[]\n"},
		"top node":   {args: []string{"top", "node", "-o", "json"}, want: `"indices": []`},
		"results":    {args: []string{"results", "--storage-path", t.TempDir(), "-o", "json"}, want: "[]\n"},
		"devices":    {args: []string{"devices", "-o", "json"}, want: `"gpus": []`},
	}
	t.Setenv("PATH", "/nonexistent") // no nvidia-smi: no GPUs
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := trainyard(tc.args...)
			if code != 0 || !strings.Contains(out, tc.want) || strings.Contains(out, "null") {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want it to hold %q and no null", tc.args, code, out, errOut, tc.want)
			}
		})
	}
}

// The --kube lists go through nonNil, which no cluster is needed to check.
func TestNonNil(t *testing.T) {
	var none []string
	if got := nonNil(none); got == nil || len(got) != 0 {
		t.Errorf("nonNil(nil) = %#v, want an empty slice", got)
	}
	if got := nonNil([]string{"a"}); len(got) != 1 || got[0] != "a" {
		t.Errorf("nonNil([a]) = %#v", got)
	}
}
