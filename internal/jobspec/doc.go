// Package jobspec turns what a user writes (a YAML job file, command-line flags, or both)
// into a defaulted, validated v1alpha1.TrainJob. It is the one place where a job is checked,
// whichever backend runs it; checks that depend on the machine (does the command exist, are
// there enough GPUs) live with the launcher.
package jobspec
