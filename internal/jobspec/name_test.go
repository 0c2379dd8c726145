package jobspec

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	cases := map[string]struct {
		name string
		ok   bool
	}{
		"one letter":            {name: "a", ok: true},
		"letters, digits, dash": {name: "bert-large-2", ok: true},
		"45 characters":         {name: strings.Repeat("a", 45), ok: true},
		"empty":                 {name: ""},
		"46 characters":         {name: strings.Repeat("a", 46)},
		"capitals":              {name: "Bert"},
		"underscore":            {name: "bert_large"},
		"dot":                   {name: "bert.large"},
		"slash":                 {name: "a/b"},
		"starts with a digit":   {name: "7b"},
		"starts with a dash":    {name: "-a"},
		"ends with a dash":      {name: "a-"},
		"space":                 {name: "a b"},
		"non-ASCII letter":      {name: "bért"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckName("--name", tc.name)
			if tc.ok {
				if err != nil {
					t.Errorf("CheckName(%q) = %v, want nil", tc.name, err)
				}
				return
			}
			want := `--name "` + tc.name + `": ` + NameRule
			if err == nil || err.Error() != want || !errors.Is(err, ErrName) {
				t.Errorf("CheckName(%q) = %v, want %q", tc.name, err, want)
			}
		})
	}
}

// A generated run name is no job name: it may be longer, but it never breaks the rule
// of run names, and a job without --name has no metadata.name.
func TestGeneratedRunNameIsNotAJobName(t *testing.T) {
	job, err := resolve(t, "--", "python3", strings.Repeat("a", 40)+".py")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if job.Name != "" || !runName.MatchString(job.Spec.RunName) {
		t.Errorf("name %q, run name %q", job.Name, job.Spec.RunName)
	}
}

// --name follows the rule of names, and an empty --name is an error, not a generated name.
func TestNameFlag(t *testing.T) {
	cases := map[string]struct {
		name    string
		wantErr string
	}{
		"a good name": {name: "bert-large"},
		"empty":       {name: "", wantErr: `--name "": ` + NameRule + "; leave --name out for a generated name"},
		"capitals":    {name: "Bert", wantErr: `invalid job: --name (metadata.name): Invalid value: "Bert": ` + NameRule},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, err := resolve(t, "--name", tc.name, "--", "python3", "train.py")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Resolve: %v", err)
			case tc.wantErr == "" && (job.Name != tc.name || job.Spec.RunName != tc.name):
				t.Errorf("name %q, run name %q; want both %q", job.Name, job.Spec.RunName, tc.name)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("Resolve error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
