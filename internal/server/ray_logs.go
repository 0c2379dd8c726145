package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/rundir"
)

// The output Ray's endpoints serve is the driver's raw output, as Ray's do: a Ray job is
// one worker running one process, the entrypoint, so its driver is rank 0, and its output
// is rank 0's log of each attempt, in order, the bytes as written, without the console
// log's "trainyard:" lines and rank prefixes (which the native API and the CLI keep).

// driverLogs returns the paths, relative to the run folder, of rank 0's logs, one per
// attempt that has a logs folder, in attempt order.
func driverLogs(root *os.Root) ([]string, error) {
	entries, err := fs.ReadDir(root.FS(), rundir.LogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the run's logs: %w", err)
	}
	var attempts []int
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "attempt-"))
		if e.IsDir() && err == nil && strings.HasPrefix(e.Name(), "attempt-") {
			attempts = append(attempts, n)
		}
	}
	slices.Sort(attempts)
	paths := make([]string, len(attempts))
	for i, n := range attempts {
		paths[i] = rundir.LogPath(n, 0)
	}
	return paths, nil
}

// openRun opens a job's run folder as a root, so that no log read leaves it through a
// symbolic link; a run folder not yet made is (nil, nil).
func openRun(runDir string) (*os.Root, error) {
	if runDir == "" {
		return nil, nil
	}
	root, err := os.OpenRoot(runDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the run folder: %w", err)
	}
	return root, nil
}

// readDriverLog returns the driver's output (see above), its last limit bytes from a line
// start after a line that says so, as readLogTail does for one file.
func readDriverLog(runDir string, limit int64) (string, error) {
	root, err := openRun(runDir)
	if root == nil || err != nil {
		return "", err
	}
	defer root.Close()
	paths, err := driverLogs(root)
	if err != nil {
		return "", err
	}
	var total int64
	sizes := make([]int64, len(paths))
	for i, p := range paths {
		if info, err := root.Stat(p); err == nil {
			sizes[i] = info.Size()
			total += sizes[i]
		}
	}
	skip := max(total-limit, 0)
	var b strings.Builder
	for i, p := range paths {
		if skip >= sizes[i] {
			skip -= sizes[i]
			continue
		}
		if err := appendFile(&b, root, p, skip, sizes[i]-skip); err != nil {
			return "", err
		}
		skip = 0
	}
	if total <= limit {
		return b.String(), nil
	}
	tail := b.String()
	if i := strings.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:] // skip the partial first line
	}
	return fmt.Sprintf("[LOG TRUNCATED — showing last %s of %s total]\n%s", humanBytes(limit), humanBytes(total), tail), nil
}

// appendFile appends n bytes of the file p of root from offset off to b.
func appendFile(b *strings.Builder, root *os.Root, p string, off, n int64) error {
	f, err := root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(b, io.NewSectionReader(f, off, n)); err != nil {
		return fmt.Errorf("read log %s: %w", filepath.Base(p), err)
	}
	return nil
}
