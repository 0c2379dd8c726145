// Package reporting receives what workers report through the in-job helper (the Python
// package trainyard): metrics and checkpoints. It serves the helper's Unix socket, hands
// rank 0's checkpoints to the checkpoint committer, and records rank 0's metrics in the run
// folder as progress.csv, result.json and TensorBoard event files.
package reporting
