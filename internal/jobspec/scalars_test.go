package jobspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Numbers and booleans in command, args and an env value are taken as their text in the
// job file, as Kubernetes users write them; strings and the rest of the job are as before.
func TestParseScalarsAsText(t *testing.T) {
	const head = "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n"
	cases := map[string]struct {
		spec        string
		wantCommand []string
		wantArgs    []string
		wantEnv     []v1.EnvVar
	}{
		"an int in args": {
			spec:        "  command: [python3, train.py]\n  args: [--epochs, 1]\n",
			wantCommand: []string{"python3", "train.py"}, wantArgs: []string{"--epochs", "1"},
		},
		"numbers and booleans as written": {
			spec:        "  command: [python3]\n  args: [0.5, 1.0, 1e-3, 0x10, 007, true, false, yes, -2, 12345678901234567890]\n",
			wantCommand: []string{"python3"},
			wantArgs:    []string{"0.5", "1.0", "1e-3", "0x10", "007", "true", "false", "yes", "-2", "12345678901234567890"},
		},
		"a block list": {
			spec:        "  command:\n  - python3\n  - 3\n  args:\n  - --lr\n  - 0.10\n",
			wantCommand: []string{"python3", "3"}, wantArgs: []string{"--lr", "0.10"},
		},
		"env values": {
			spec:        "  command: [python3]\n  env:\n  - name: A\n    value: 1\n  - name: B\n    value: true\n  - name: C\n    value: \"2\"\n  - name: D\n",
			wantCommand: []string{"python3"},
			wantEnv:     []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "true"}, {Name: "C", Value: "2"}, {Name: "D"}},
		},
		"an alias": {
			spec:        "  command: [python3, &n 3]\n  args: [*n]\n",
			wantCommand: []string{"python3", "3"}, wantArgs: []string{"3"},
		},
		"strings as they are": {
			spec:        "  command: [python3, \"1\", '0.5', 'true']\n",
			wantCommand: []string{"python3", "1", "0.5", "true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, err := Parse([]byte(head + tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCommand, job.Spec.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantArgs, job.Spec.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEnv, job.Spec.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// A JSON job file's numbers are taken as written too.
func TestParseJSONScalarsAsText(t *testing.T) {
	job, err := Parse([]byte(`{"apiVersion": "trainyard.dev/v1alpha1", "kind": "TrainJob",
		"spec": {"command": ["python3"], "args": [2.50, true], "env": [{"name": "A", "value": 7}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2.50", "true"}, job.Spec.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]v1.EnvVar{{Name: "A", Value: "7"}}, job.Spec.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}
