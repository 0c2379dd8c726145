package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trainyard/trainyard/internal/workload"
)

// gangSecret makes the job's gang Secret, once: a random key, owned by the TrainJob, that
// every worker reads, so that only the job's own workers can join its gang or speak in it
// (internal/gang authenticates each message with it). A Secret of that name that the job
// does not own is refused: its key would be someone else's.
func (s *step) gangSecret(ctx context.Context) (bool, error) {
	if _, ok := s.r.gangSecrets.Load(s.job.UID); ok {
		return true, nil
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return false, fmt.Errorf("gang key: %w", err)
	}
	// Hex: the key reaches the worker as an environment variable, which holds no NUL.
	sec := workload.GangSecret(s.job, []byte(hex.EncodeToString(raw)))
	err := s.r.Client.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		m, merr := s.r.metadata(ctx, "Secret", sec.Namespace, sec.Name)
		if merr != nil {
			return false, merr
		}
		if !ownedBy(m, s.job) {
			return false, s.fail("GangSecretConflict", fmt.Sprintf("a Secret %q that this TrainJob does not own exists in namespace %s: "+
				"the operator keeps the key of the job's gang there; delete that Secret or give the job another name", sec.Name, sec.Namespace))
		}
		err = nil
	}
	if err != nil {
		return false, fmt.Errorf("create the gang Secret %s: %w", sec.Name, err)
	}
	s.r.gangSecrets.Store(s.job.UID, true)
	return true, nil
}
