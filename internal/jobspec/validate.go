package jobspec

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/gitsource"
)

// Limits that keep a job file from asking for something absurd.
const (
	MaxWorkers        = 10000
	MaxProcsPerWorker = 1024
	MaxRestarts       = 10000
	// MaxResizeInterval is the longest spec.resizeIntervalSeconds: a week.
	MaxResizeInterval = 7 * 24 * time.Hour
)

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	runName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// Invalid is the error Validate returns: every problem found, each naming its field.
type Invalid struct {
	Errs field.ErrorList
	// Flags maps a field path ("spec.workers") to the flag that sets it ("--workers"),
	// so that messages name what the user typed.
	Flags map[string]string
}

// Error lists the problems one per line.
func (e *Invalid) Error() string {
	lines := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		lines[i] = fe.Error()
		if flag, ok := e.Flags[fe.Field]; ok {
			lines[i] = flag + " (" + fe.Field + ")" + strings.TrimPrefix(lines[i], fe.Field)
		}
	}
	if len(lines) == 1 {
		return "invalid job: " + lines[0]
	}
	return "invalid job:\n  " + strings.Join(lines, "\n  ")
}

// CheckStoragePath checks a storage path: a folder, or s3://bucket/prefix (any other URI is
// refused with what to give instead, never taken as a folder).
func CheckStoragePath(p string) error {
	if !IsURI(p) {
		return nil
	}
	_, err := bucket.Parse(p)
	return err
}

// Validate checks a defaulted job. It returns nil or an *Invalid listing every problem.
func Validate(job *v1.TrainJob) error {
	var errs field.ErrorList
	if job.Name != "" && !ValidName(job.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), job.Name, NameRule))
	}
	errs = append(errs, validateSpec(&job.Spec, field.NewPath("spec"))...)
	if len(errs) == 0 {
		return nil
	}
	return &Invalid{Errs: errs}
}

func validateSpec(s *v1.TrainJobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, intRange(p.Child("workers"), s.Workers, 1, MaxWorkers)...)
	if m := s.MinWorkers; m != nil && (*m < 1 || int(*m) > s.WorkerCount()) {
		errs = append(errs, field.Invalid(p.Child("minWorkers"), *m,
			fmt.Sprintf("must be between 1 and spec.workers (%d): the fewest workers the gang may run with", s.WorkerCount())))
	}
	errs = append(errs, intRange(p.Child("procsPerWorker"), s.ProcsPerWorker, 1, MaxProcsPerWorker)...)
	errs = append(errs, validateResources(&s.Resources, p.Child("resources"))...)
	errs = append(errs, validateCommand(s.Command, p.Child("command"))...)
	errs = append(errs, validateEnv(s.Env, p.Child("env"))...)
	if src, ok := GitSource(s); ok {
		if err := gitsource.Check(src); err != nil {
			errs = append(errs, field.Invalid(p.Child("source", "git"), gitsource.Redact(src.URL), err.Error()))
		}
	}
	if s.MaxRestarts < 0 || s.MaxRestarts > MaxRestarts {
		errs = append(errs, field.Invalid(p.Child("maxRestarts"), s.MaxRestarts, fmt.Sprintf("must be between 0 and %d", MaxRestarts)))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && (*g < 0 || *g > 3600) {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be between 0 and 3600 seconds"))
	}
	if r := s.ResizeIntervalSeconds; r != nil && (*r < 0 || *r > int64(MaxResizeInterval/time.Second)) {
		errs = append(errs, field.Invalid(p.Child("resizeIntervalSeconds"), *r,
			fmt.Sprintf("must be between 0 (resize at once) and %d seconds (a week)", int64(MaxResizeInterval/time.Second))))
	}
	if s.HangTimeoutSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("hangTimeoutSeconds"), s.HangTimeoutSeconds, "must be 0 (off) or more"))
	}
	if t := s.ProcessGroupTimeoutSeconds; t != nil && (*t < 1 || *t > 86400) {
		errs = append(errs, field.Invalid(p.Child("processGroupTimeoutSeconds"), *t, "must be between 1 and 86400 seconds"))
	}
	errs = append(errs, validateCheckpoints(&s.Checkpoints, p.Child("checkpoints"))...)
	switch {
	case s.StoragePath == "":
		errs = append(errs, field.Required(p.Child("storagePath"), "the folder that holds runs"))
	default:
		if err := CheckStoragePath(s.StoragePath); err != nil {
			errs = append(errs, field.Invalid(p.Child("storagePath"), s.StoragePath, err.Error()))
		}
	}
	if !runName.MatchString(s.RunName) {
		errs = append(errs, field.Invalid(p.Child("runName"), s.RunName,
			"must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (at most 128)"))
	}
	return errs
}

func validateCheckpoints(c *v1.CheckpointPolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Keep < 0 {
		errs = append(errs, field.Invalid(p.Child("keep"), c.Keep, "must be 0 (keep all) or more"))
	}
	switch {
	case c.ScoreOrder != "" && c.ScoreOrder != "max" && c.ScoreOrder != "min":
		errs = append(errs, field.NotSupported(p.Child("scoreOrder"), c.ScoreOrder, []string{"max", "min"}))
	case c.ScoreOrder != "" && c.ScoreMetric == "":
		errs = append(errs, field.Required(p.Child("scoreMetric"), "scoreOrder needs the metric to order by"))
	}
	if len(c.ScoreMetric) > 256 {
		errs = append(errs, field.TooLong(p.Child("scoreMetric"), c.ScoreMetric, 256))
	}
	return errs
}

func intRange(p *field.Path, v *int32, lo, hi int32) field.ErrorList {
	if v == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	if *v < lo || *v > hi {
		return field.ErrorList{field.Invalid(p, *v, fmt.Sprintf("must be between %d and %d", lo, hi))}
	}
	return nil
}

func validateResources(r *v1.WorkerResources, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	positive := func(name string, q *resource.Quantity) {
		if q != nil && q.Sign() <= 0 {
			errs = append(errs, field.Invalid(p.Child(name), q.String(), "must be greater than zero"))
		}
	}
	positive("cpu", r.CPU)
	positive("memory", r.Memory)
	if r.GPU < 0 || r.GPU > 1024 {
		errs = append(errs, field.Invalid(p.Child("gpu"), r.GPU, "must be between 0 and 1024"))
	}
	return errs
}

func validateCommand(cmd []string, p *field.Path) field.ErrorList {
	if len(cmd) == 0 {
		return field.ErrorList{field.Required(p, "the program each worker runs, e.g. [\"/usr/bin/python3\", \"train.py\"]")}
	}
	if strings.TrimSpace(cmd[0]) == "" {
		return field.ErrorList{field.Invalid(p.Index(0), cmd[0], "must name a program")}
	}
	return nil
}

func validateEnv(env []v1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, e := range env {
		np := p.Index(i).Child("name")
		switch {
		case !envName.MatchString(e.Name):
			errs = append(errs, field.Invalid(np, e.Name, "must be letters, digits and '_', not starting with a digit"))
		case seen[e.Name]:
			errs = append(errs, field.Duplicate(np, e.Name))
		}
		seen[e.Name] = true
	}
	return errs
}
