package podworker

import (
	"fmt"
	"os"

	"github.com/trainyard/trainyard/internal/workload"
)

// WriteSummary writes s (workload.Summary.Encode) to path, the container's termination
// message file (workload.TerminationLog), for the operator to read.
func WriteSummary(path string, s workload.Summary) error {
	if err := os.WriteFile(path, s.Encode(), 0o644); err != nil {
		return fmt.Errorf("write the worker summary: %w", err)
	}
	return nil
}
