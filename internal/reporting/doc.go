// Package reporting receives what workers report through the in-job helper (the Python
// package trainyard): metrics and checkpoints. It serves the helper's Unix socket, merges
// the checkpoint folders the ranks pass with the same report into one checkpoint and hands
// it to the checkpoint committer once every rank has made that report (shards.go), and
// records rank 0's metrics in the run folder as progress.csv, result.json and TensorBoard
// event files.
package reporting
