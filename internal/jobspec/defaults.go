package jobspec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// DefaultStoragePath is where runs are kept unless the job says otherwise; "~" is the
// user's home folder.
const DefaultStoragePath = "~/trainyard_results"

// Env gives Default what it needs from the machine: the folder trainyard runs in, the
// user's home folder and the clock. The zero value uses the process's own.
type Env struct {
	WorkDir string
	Home    string
	Now     func() time.Time
}

func (e Env) withDefaults() (Env, error) {
	var err error
	if e.WorkDir == "" {
		if e.WorkDir, err = os.Getwd(); err != nil {
			return e, fmt.Errorf("find the current folder: %w", err)
		}
	}
	if e.Home == "" {
		if e.Home, err = os.UserHomeDir(); err != nil {
			return e, fmt.Errorf("find the home folder: %w", err)
		}
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	return e, nil
}

// DefaultCommon fills the fields a user left out that have the same default on every
// backend (this machine, the job server, Kubernetes): counts, timeouts, the score order.
func DefaultCommon(s *v1.TrainJobSpec) {
	if s.Workers == nil {
		s.Workers = ptr(int32(1))
	}
	if s.ProcsPerWorker == nil {
		s.ProcsPerWorker = ptr(max(1, s.Resources.GPU))
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr(int64(30))
	}
	if s.ProcessGroupTimeoutSeconds == nil {
		s.ProcessGroupTimeoutSeconds = ptr(int64(300))
	}
	if s.Checkpoints.ScoreMetric != "" && s.Checkpoints.ScoreOrder == "" {
		s.Checkpoints.ScoreOrder = "max"
	}
}

// Default fills the fields a user left out and makes paths absolute. It leaves values
// the user set, valid or not, for Validate to judge.
func Default(job *v1.TrainJob, env Env) error {
	env, err := env.withDefaults()
	if err != nil {
		return err
	}
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	s := &job.Spec
	DefaultCommon(s)
	if s.StoragePath == "" {
		s.StoragePath = DefaultStoragePath
	}
	if !IsURI(s.StoragePath) { // s3://bucket is no folder: LocalStorage stages it
		s.StoragePath = absPath(s.StoragePath, env)
	}
	if s.RunName == "" {
		s.RunName = job.Name
	}
	if s.RunName == "" {
		// The script is often in args (command: [python3], args: [train.py]).
		s.RunName = GenerateName(append(slices.Clip(s.Command), s.Args...), env.Now())
	}
	if _, ok := GitSource(s); ok && s.WorkingDir == "" {
		// The code is cloned into the run folder's code/, so the workers start there (as
		// Arena's start in --working-dir, where it clones code/).
		s.WorkingDir = RunFolder(s)
	}
	s.WorkingDir = absPath(s.WorkingDir, env)
	return nil
}

// absPath expands a leading "~" and makes p absolute against the working folder;
// an empty p becomes the working folder.
func absPath(p string, env Env) string {
	switch {
	case p == "~":
		p = env.Home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(env.Home, p[2:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(env.WorkDir, p)
	}
	return filepath.Clean(p)
}

// uriScheme matches the start of a URI: a scheme (RFC 3986) and "://".
var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// IsURI reports whether p is a URI (s3://bucket/prefix, gs://..., file://...) rather than
// a path: Trainyard keeps runs in folders, and a URI taken as a path would become a local
// folder named "s3:".
func IsURI(p string) bool { return uriScheme.MatchString(p) }

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// ScriptName names a job after the script its command runs (the last argument that is not
// a flag, up to the first *.py), lower-cased, with runs of characters other than letters,
// digits and '-' made '-': "train" for [python3, -u, Train.py, --lr, 0.1]. It is "" when
// nothing is left.
func ScriptName(command []string) string {
	base := ""
	for _, arg := range command {
		if arg != "" && !strings.HasPrefix(arg, "-") {
			base = arg
		}
		if strings.HasSuffix(arg, ".py") {
			break
		}
	}
	if base == "" {
		return ""
	}
	base = strings.TrimSuffix(filepath.Base(base), ".py")
	return strings.Trim(nonName.ReplaceAllString(strings.ToLower(base), "-"), "-")
}

// GenerateName makes a run name from the script the command runs and the time, such as
// "train-20261122-134501-3fa9".
func GenerateName(command []string, now time.Time) string {
	base := ScriptName(command)
	if base == "" || len(base) > 40 {
		base = "run"
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", base, now.Format("20060102-150405"), hex.EncodeToString(b[:]))
}

func ptr[T any](v T) *T { return &v }
