// Package secrets keeps a job's secret environment variables out of everything that is
// stored, shown or shared: the job server's store and spec files, API answers, the run
// folder's job.yaml (which a team may read), logs, and, for the git credentials, the
// workers' environment.
//
// A variable is secret when its name says so (IsSecret): Arena's git credentials
// (GIT_SYNC_USERNAME, GIT_SYNC_PASSWORD), the server's GPU lease secret, and any name with
// PASSWORD, SECRET, TOKEN, CREDENTIAL, API_KEY, ACCESS_KEY or PRIVATE_KEY in it (HF_TOKEN,
// WANDB_API_KEY, AWS_SECRET_ACCESS_KEY), but not one that ends in _FILE, _PATH or _DIR,
// which names where a secret is, not the secret. The job server takes them out of a job
// at submission (Take) and keeps them in a file of their own (WriteFile: 0600, in its
// private state folder); the job's supervisor reads that file (ReadFile, named by
// EnvFile) and gives them to the workers, except the git credentials, which only the clone
// uses (CloneOnly). What is shown in their place says that there is one (Redaction).
package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// EnvFile names the file of a job's secrets for its supervisor (the job server sets it).
const EnvFile = "TRAINYARD_SECRETS_FILE"

// Redaction is what is shown instead of a secret's value.
const Redaction = "<redacted>"

// The git credentials, for the clone of a job's code only.
const (
	gitUsername = "GIT_SYNC_USERNAME"
	gitPassword = "GIT_SYNC_PASSWORD"
	leaseSecret = "TRAINYARD_GPU_LEASE_SECRET"
)

// secretWords are parts of a name that make it a secret's.
var secretWords = []string{"PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "API_KEY", "APIKEY", "ACCESS_KEY", "PRIVATE_KEY"}

// IsSecret reports whether the variable name holds a secret (see the package comment).
func IsSecret(name string) bool {
	n := strings.ToUpper(name)
	switch {
	case n == gitUsername || n == gitPassword || n == leaseSecret:
		return true
	case strings.HasSuffix(n, "_FILE") || strings.HasSuffix(n, "_PATH") || strings.HasSuffix(n, "_DIR"):
		return false
	}
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(n, w) })
}

// CloneOnly reports whether the variable name is a git credential, which only the clone
// of a job's code uses: never a worker's environment.
func CloneOnly(name string) bool {
	n := strings.ToUpper(name)
	return n == gitUsername || n == gitPassword
}

// Take removes the secret variables from env and returns them.
func Take(env *[]v1.EnvVar) []v1.EnvVar {
	var taken []v1.EnvVar
	*env = slices.DeleteFunc(*env, func(e v1.EnvVar) bool {
		if IsSecret(e.Name) {
			taken = append(taken, e)
			return true
		}
		return false
	})
	return taken
}

// Redacted returns a copy of env with the value of each secret variable replaced by
// Redaction.
func Redacted(env []v1.EnvVar) []v1.EnvVar {
	out := slices.Clone(env)
	for i := range out {
		if IsSecret(out[i].Name) {
			out[i].Value = Redaction
		}
	}
	return out
}

// Names returns the names of env's variables.
func Names(env []v1.EnvVar) []string {
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	return names
}

// Pairs returns env as NAME=value strings.
func Pairs(env []v1.EnvVar) []string {
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
}

// WriteFile writes env to path atomically, readable by its owner alone (0600): into a new
// temporary file beside it, then renamed over it. path's folder must exist; it should be
// private (the job server's state folder).
func WriteFile(path string, env []v1.EnvVar) error {
	data, err := yaml.Marshal(env)
	if err != nil {
		return fmt.Errorf("write secrets: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write secrets: %w", err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write secrets: %w", err)
	}
	return nil
}

// ReadFile reads a file WriteFile wrote. It refuses a symbolic link, a file of another
// user, and one that group or others may read or write.
func ReadFile(path string) ([]v1.EnvVar, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	if err := checkPrivate(path, info); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	var env []v1.EnvVar
	if err := yaml.UnmarshalStrict(data, &env); err != nil {
		return nil, fmt.Errorf("read secrets %s: %w", path, err)
	}
	return env, nil
}

// errNotPrivate is wrapped by the refusal of a secrets file others may reach.
var errNotPrivate = errors.New("secrets file is not private")

func checkPrivate(path string, info fs.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s: %w: not a regular file", path, errNotPrivate)
	case info.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s: %w: mode %o; it must be 0600", path, errNotPrivate, info.Mode().Perm())
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s: %w: it belongs to uid %d, not to you (uid %d)", path, errNotPrivate, st.Uid, os.Geteuid())
	}
	return nil
}

// RedactRuntimeEnv returns a copy of Ray's runtime_env (JSON) with the values of its secret
// env_vars replaced by Redaction; anything it cannot read is returned as it is.
func RedactRuntimeEnv(raw json.RawMessage) json.RawMessage {
	var doc map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &doc) != nil {
		return raw
	}
	var vars map[string]any
	if json.Unmarshal(doc["env_vars"], &vars) != nil || vars == nil {
		return raw
	}
	changed := false
	for k := range vars {
		if IsSecret(k) {
			vars[k], changed = Redaction, true
		}
	}
	if !changed {
		return raw
	}
	doc["env_vars"] = marshal(vars)
	if out := marshal(doc); out != nil {
		return out
	}
	return raw
}

// marshal encodes v as JSON without escaping <, > and & (Redaction holds two of them).
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	return bytes.TrimSpace(b.Bytes())
}
