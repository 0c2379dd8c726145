package operator

import (
	"context"
	"errors"
	"log/slog"

	"k8s.io/client-go/rest"
)

// Run runs the operator's manager until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options, logger *slog.Logger) error {
	return errors.New("operator: not implemented yet")
}
