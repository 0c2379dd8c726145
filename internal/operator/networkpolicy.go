package operator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trainyard/trainyard/internal/workload"
)

// network is who besides a gang may reach its pods: the operator's own pod and the API
// server's proxy.
func (r *Reconciler) network() workload.Network {
	return workload.Network{OperatorNamespace: r.Options.OperatorNamespace, APIServerCIDRs: r.Options.APIServerCIDRs}
}

// networkPolicy creates the NetworkPolicy of the job's workers, before an attempt's pods
// (asked at each attempt; the first creates it). The TrainJob owns it, so it goes with it.
func (s *step) networkPolicy(ctx context.Context) error {
	np := workload.RenderNetworkPolicy(s.job, s.r.network())
	if err := s.r.Client.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create NetworkPolicy %s: %w", np.Name, err)
	}
	return nil
}
