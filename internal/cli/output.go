package cli

import (
	"fmt"
	"slices"
	"strings"
)

// This file holds the -o flag of the commands that work on this machine (results,
// devices, version); the commands that talk to a server share checkOutput and printData.

// checkFormat refuses an -o value that is not one of allowed (or empty, the command's own
// text).
func checkFormat(output string, allowed ...string) error {
	if output == "" || slices.Contains(allowed, output) {
		return nil
	}
	return usageError(fmt.Errorf("--output %q: must be %s, or left out", output, strings.Join(allowed, ", ")))
}

// nonNil returns s, or an empty slice when s is nil, so that JSON of nothing is [], not
// null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
