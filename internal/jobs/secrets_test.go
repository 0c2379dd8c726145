package jobs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// A job's secret variables are kept apart from its spec (0600, in the state folder), its
// workers get them but for the git credentials, and neither the store, the spec files,
// the run folder's job.yaml nor the console log holds their values; deleting the job
// removes them.
func TestSecretsKeptApart(t *testing.T) {
	e := newEnv(t)
	job := e.job(`echo "token=${HF_TOKEN:-none} git=${GIT_SYNC_PASSWORD:-none} file=${TRAINYARD_SECRETS_FILE:-none}"`, "")
	job.Spec.Env = append(job.Spec.Env, v1.EnvVar{Name: "HF_TOKEN", Value: "hf-value-1234"},
		v1.EnvVar{Name: "GIT_SYNC_PASSWORD", Value: "git-value-5678"}, v1.EnvVar{Name: "EPOCHS", Value: "3"})
	j, err := e.svc.Submit(Submission{Job: job, RuntimeEnv: json.RawMessage(`{"env_vars": {"HF_TOKEN": "hf-value-1234"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(j.SecretEnv, ",") != "HF_TOKEN,GIT_SYNC_PASSWORD" {
		t.Errorf("SecretEnv %v", j.SecretEnv)
	}
	path := e.svc.secretsPath(j.ID)
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v %v, want mode 0600", info, err)
	}
	done := e.waitFor(j.ID, store.Succeeded, store.Failed)
	log, _ := os.ReadFile(LogPath(done))
	if !strings.Contains(string(log), "token=hf-value-1234 git=none file=none") {
		t.Errorf("the worker's environment: want HF_TOKEN alone of the secrets; console log:\n%s", log)
	}
	e.close()
	leaks := map[string]string{"the store": filepath.Join(e.dir, "state", "jobs.db"), "the spec file": e.svc.specPath(j.ID),
		"job.yaml": filepath.Join(done.RunDir, rundir.SpecFile)}
	for what, p := range leaks {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, v := range []string{"hf-value-1234", "git-value-5678"} {
			if strings.Contains(string(data), v) {
				t.Errorf("%s (%s) holds a secret's value", what, p)
			}
		}
	}
	e.open()
	if err := e.svc.Delete(j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the deleted job's secrets file: %v, want it gone", err)
	}
}
