package secrets

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestIsSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"GIT_SYNC_USERNAME": true, "GIT_SYNC_PASSWORD": true, "TRAINYARD_GPU_LEASE_SECRET": true,
		"HF_TOKEN": true, "WANDB_API_KEY": true, "AWS_SECRET_ACCESS_KEY": true, "db_password": true, "GH_PRIVATE_KEY": true,
		"AZURE_CREDENTIALS": true, "TRAINYARD_TOKEN": true,
		"TRAINYARD_TOKEN_FILE": false, "GOOGLE_APPLICATION_CREDENTIALS_PATH": false, "SECRET_DIR": false,
		"PATH": false, "EPOCHS": false, "NCCL_DEBUG": false, "TOKENIZERS_PARALLELISM": true,
	} {
		if got := IsSecret(name); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", name, got, want)
		}
	}
	if !CloneOnly("GIT_SYNC_PASSWORD") || !CloneOnly("git_sync_username") || CloneOnly("HF_TOKEN") {
		t.Error("CloneOnly is wrong")
	}
}

func TestTakeAndRedact(t *testing.T) {
	env := []v1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: "HF_TOKEN", Value: "hf_x"}, {Name: "GIT_SYNC_PASSWORD", Value: "pw"}}
	shown := Redacted(env)
	if diff := cmp.Diff([]v1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: "HF_TOKEN", Value: Redaction},
		{Name: "GIT_SYNC_PASSWORD", Value: Redaction}}, shown); diff != "" {
		t.Errorf("Redacted (-want +got):\n%s", diff)
	}
	if env[1].Value != "hf_x" {
		t.Error("Redacted changed its argument")
	}
	taken := Take(&env)
	if diff := cmp.Diff([]v1.EnvVar{{Name: "EPOCHS", Value: "3"}}, env); diff != "" {
		t.Errorf("what Take left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"HF_TOKEN", "GIT_SYNC_PASSWORD"}, Names(taken)); diff != "" {
		t.Errorf("what Take took (-want +got):\n%s", diff)
	}
	raw := json.RawMessage(`{"working_dir": "gcs://x.zip", "env_vars": {"A": "1", "HF_TOKEN": "hf_x"}}`)
	got := string(RedactRuntimeEnv(raw))
	if strings.Contains(got, "hf_x") || !strings.Contains(got, `"HF_TOKEN":"<redacted>"`) || !strings.Contains(got, `"A":"1"`) ||
		!strings.Contains(got, "gcs://x.zip") {
		t.Errorf("RedactRuntimeEnv = %s", got)
	}
	for _, same := range []string{`{"env_vars": {"A": "1"}}`, `not json`, ``, `{"env_vars": 3}`} {
		if got := string(RedactRuntimeEnv(json.RawMessage(same))); got != same {
			t.Errorf("RedactRuntimeEnv(%s) = %s, want it unchanged", same, got)
		}
	}
}

// The file of secrets is 0600, read back as written, and refused when others may read
// it or it is a link.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	env := []v1.EnvVar{{Name: "HF_TOKEN", Value: "hf_x"}, {Name: "GIT_SYNC_PASSWORD", Value: "p: w\n"}}
	if err := WriteFile(path, env); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", info.Mode(), err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "it must be 0600") {
		t.Errorf("a group-readable file: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(link); err == nil {
		t.Error("a symbolic link was read")
	}
}
