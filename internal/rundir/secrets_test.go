package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// job.yaml, which a group may read, shows that a secret variable is set, not its value;
// the job itself keeps it.
func TestSpecFileRedactsSecrets(t *testing.T) {
	job := testJob(t)
	job.Spec.Env = []v1.EnvVar{{Name: "HF_TOKEN", Value: "hf-value-1234"}, {Name: "EPOCHS", Value: "3"}}
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec, err := os.ReadFile(filepath.Join(r.Dir, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(spec), "hf-value-1234") || !strings.Contains(string(spec), "<redacted>") ||
		!strings.Contains(string(spec), `value: "3"`) {
		t.Errorf("job.yaml:\n%s", spec)
	}
	if job.Spec.Env[0].Value != "hf-value-1234" {
		t.Error("writing job.yaml changed the job")
	}
}
