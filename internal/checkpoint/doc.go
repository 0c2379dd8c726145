// Package checkpoint commits, verifies, retains and finds the checkpoints of a run, kept in
// the run's folder <storage>/<run>/ beside its other files (run.json, logs/), which it
// leaves alone.
//
// A training process writes a checkpoint into a folder of its own (torch.save files, any
// layout of regular files and folders) and hands that folder to Trainyard. Commit makes it
// the committed checkpoint <run>/checkpoint_NNNNNN/, which becomes visible only when it is
// complete and durable:
//
//  1. Take checks the folder (it exists, is a folder, holds only regular files and folders,
//     is not part of the run's checkpoints) and renames it to a private sibling,
//     .<base>.trainyard-<random>, in the same parent, then recreates an empty folder with the
//     same permissions at the old path. Training can go on (and its temporary-folder
//     cleanup works) at once; this is the only step the training process waits for.
//  2. The taken folder is staged in <run>/.staging/checkpoint_NNNNNN.<random>: renamed there
//     when it is on the run folder's filesystem, copied otherwise (the copy computes each
//     file's CRC-32C as it goes and fails if a file changes size or vanishes).
//  3. Every file is synced and its size and CRC-32C (Castagnoli) recorded in the manifest,
//     .trainyard-manifest.json, which is written to a temporary file, synced and renamed
//     into place; then every folder of the checkpoint is synced.
//  4. The staged folder is renamed to <run>/checkpoint_NNNNNN (never over an existing one)
//     and the run folder is synced. Only now is the checkpoint visible.
//  5. The taken folder of a copy is removed, and the committed files are made read-only.
//
// Indices start at 1 and grow by one with every commit: the next index is one more than the
// highest one committed or staged in the store, including those that failed or were
// deleted since it was opened.
//
// # Crashes
//
// A crash or error at any point leaves the newest complete checkpoint as it was, and never
// a partial checkpoint_NNNNNN folder that List or Latest would return. What a commit that
// did not finish leaves behind is in one of two places:
//
//   - <run>/.staging/: staged folders of unfinished commits and checkpoints being deleted.
//     Open and OpenIn remove everything there, so open one Store per run folder at a time.
//   - the private sibling .<base>.trainyard-<random> next to the folder that was handed
//     over. A commit that fails with an error puts the files back there (the rename path)
//     or leaves them there (the copy path) and names that folder in its error, so nothing
//     the training process wrote is lost; removing it is left to the user. Open cannot
//     find these, as it does not know where the training process wrote.
//
// # Verification and retention
//
// Verify checks a checkpoint against its manifest: every listed file exists with its size
// and CRC-32C, and there are no other files. Latest returns the newest checkpoint that
// verifies and says why newer ones were skipped. Retain deletes what a Policy does not
// keep, by recency or by a reported metric, but never the latest checkpoint; a deletion
// first renames the checkpoint into .staging, so a crash never leaves a half-deleted one.
//
// A Committer runs commits and retention in the background, one at a time, while training
// goes on.
//
// # The folders it trusts
//
// A Store works in the run folder it was given opened (OpenIn, InspectIn: an os.Root, which
// rundir.Run.OpenRoot gives), never through the folder's path again: scanning, manifests,
// verification, staging, retention, the rename into place and the read-only marking all
// go through that folder and the .staging folder opened in it (renameat2 between the two,
// fsync of their descriptors). A folder put in the run folder's place while the store is
// open is not read, and nothing is committed into it. Take opens the folder that holds
// the handed-over folder once (in the run folder the store opened, when the path lies in
// the run folder's path) and does its checks, renames and the commit through it, without
// following links. A checkpoint_* folder, its manifest, or a file in it that belongs to
// another user than the one this process runs as is never used (ErrNotOwned): Latest and
// LatestBefore skip it and say why, List leaves it out, Verify refuses it; Take refuses a
// folder or file of another user too.
package checkpoint
