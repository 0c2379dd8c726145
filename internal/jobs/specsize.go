package jobs

import (
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/ganglease"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// ErrSpecTooLarge: the job's spec, as its supervisor reads it, would be over the largest
// job file `trainyard run -f` reads (jobspec.MaxFileSize), so the job could never start.
var ErrSpecTooLarge = errors.New("the job's spec is too large")

// checkSpecSize refuses a job whose spec file, as the job's supervisor gets it (YAML,
// with the GPU lease's variables that startSupervisor adds), would be over
// jobspec.MaxFileSize: the supervisor refuses such a file, so the job would be accepted
// and then fail. Restarts only lower the spec's maxRestarts, so the file never grows.
func (s *Service) checkSpecSize(id string, job *v1.TrainJob) error {
	n, err := s.specSize(id, job)
	if err != nil {
		return err
	}
	if n > jobspec.MaxFileSize {
		return fmt.Errorf("%w: it is %d bytes as its supervisor reads it (YAML), over the limit of %d bytes for a job's spec; "+
			"most of a large spec is its env vars and args: pass big values in a file in the working folder instead",
			ErrSpecTooLarge, n, jobspec.MaxFileSize)
	}
	return nil
}

// specSize returns the size of the spec file of the job with that ID, with every
// variable startSupervisor may add for the GPU lease.
func (s *Service) specSize(id string, job *v1.TrainJob) (int, error) {
	spec := job.DeepCopy()
	if s.cfg.LeaseSocket != "" {
		spec.Spec.Env = append(spec.Spec.Env, v1.EnvVar{Name: ganglease.EnvSocket, Value: s.cfg.LeaseSocket},
			v1.EnvVar{Name: ganglease.EnvJob, Value: id},
			v1.EnvVar{Name: ganglease.EnvSecret, Value: ganglease.Secret(s.cfg.LeaseKey, id)})
	}
	data, err := yaml.Marshal(spec)
	if err != nil {
		return 0, fmt.Errorf("encode spec: %w", err)
	}
	return len(data), nil
}
