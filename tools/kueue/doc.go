// Package kueue pins Kueue for the test cluster (`make cluster-assets` builds its
// cmd/kueue, the tool this module declares, and copies its CRDs and webhook
// configurations next to it). A module of its own, out of the main module's dependencies.
package kueue
