package server

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/internal/upload"
)

// runtimeEnv is what a Ray runtime_env asks of a job, of the parts this server supports.
type runtimeEnv struct {
	// WorkingDir is empty, an absolute folder on this machine, or an uploaded package's
	// name (PackageName set).
	WorkingDir string
	// PackageName is the name of the gcs:// package that WorkingDir names, if it does.
	PackageName string
	// EnvVars are set in the job's process.
	EnvVars map[string]string
}

// packageProtocol is the only package protocol this server stores: the one Ray's clients
// upload working_dir to.
const packageProtocol = "gcs"

// runtimeEnvKeys are the runtime_env keys the server accepts, with their decoders.
var runtimeEnvKeys = map[string]func(env *runtimeEnv, raw json.RawMessage) error{
	"working_dir": decodeWorkingDir,
	"env_vars":    decodeEnvVars,
	// The client applies excludes when it packs working_dir; config tunes Ray's setup.
	"excludes": func(*runtimeEnv, json.RawMessage) error { return nil },
	"config":   func(*runtimeEnv, json.RawMessage) error { return nil },
}

// unsupportedHints say what to do instead of the runtime_env keys that Ray knows and this
// server does not support.
var unsupportedHints = map[string]string{
	"pip":           "install packages in the image",
	"uv":            "install packages in the image",
	"conda":         "install packages in the image",
	"container":     "run trainyard in the image instead",
	"image_uri":     "run trainyard in the image instead",
	"py_modules":    "put the modules in working_dir, which is the job's working folder",
	"py_executable": `start the interpreter in the entrypoint, e.g. "/opt/venv/bin/python train.py"`,
	"java_jars":     "put the jars in working_dir",
}

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseRuntimeEnv checks a Ray runtime_env and returns what it asks for. A key this
// server does not support is refused, naming the key and what to do instead.
func parseRuntimeEnv(raw json.RawMessage) (runtimeEnv, error) {
	var env runtimeEnv
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return env, invalid("runtime_env must be an object, got %s", jsonKind(raw))
	}
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		if string(fields[key]) == "null" {
			continue
		}
		decode, ok := runtimeEnvKeys[key]
		if !ok {
			return env, unsupportedKey(key)
		}
		if err := decode(&env, fields[key]); err != nil {
			return env, err
		}
	}
	return env, nil
}

// unsupportedKey refuses a runtime_env key.
func unsupportedKey(key string) error {
	hint, ok := unsupportedHints[key]
	if !ok {
		hint = "this server supports working_dir and env_vars"
	}
	return invalid("runtime_env.%s is not supported: %s", truncate(key, 64), hint)
}

// decodeWorkingDir reads working_dir: a gcs:// package uploaded to this server, or an
// absolute folder on this machine.
func decodeWorkingDir(env *runtimeEnv, raw json.RawMessage) error {
	var dir string
	if json.Unmarshal(raw, &dir) != nil {
		return invalid("runtime_env.working_dir must be a string, got %s", jsonKind(raw))
	}
	if protocol, name, ok := strings.Cut(dir, "://"); ok {
		if protocol != packageProtocol {
			return invalid("runtime_env.working_dir %q: only packages uploaded to this server (gcs://_ray_pkg_<hash>.zip) and folders on this machine are supported",
				truncate(dir, 200))
		}
		if err := upload.ValidName(name); err != nil {
			return invalid("runtime_env.working_dir: %v", err)
		}
		env.WorkingDir, env.PackageName = dir, name
		return nil
	}
	if !filepath.IsAbs(dir) || strings.ContainsRune(dir, 0) {
		return invalid("runtime_env.working_dir %q must be an absolute folder on the server's machine, or a package URI; Ray's clients upload a local folder for you",
			truncate(dir, 200))
	}
	env.WorkingDir = filepath.Clean(dir)
	return nil
}

// decodeEnvVars reads env_vars: names of letters, digits and '_', string values.
func decodeEnvVars(env *runtimeEnv, raw json.RawMessage) error {
	var vars map[string]string
	if json.Unmarshal(raw, &vars) != nil {
		return invalid("runtime_env.env_vars must be an object whose values are strings, got %s", jsonKind(raw))
	}
	for name, value := range vars {
		if !envVarName.MatchString(name) {
			return invalid("runtime_env.env_vars: %q is not a variable name: use letters, digits and '_', not starting with a digit", truncate(name, 64))
		}
		if strings.ContainsRune(value, 0) {
			return invalid("runtime_env.env_vars.%s holds a NUL byte, which no environment variable can", name)
		}
	}
	env.EnvVars = vars
	return nil
}
