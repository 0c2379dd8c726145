package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/rundir"
)

// maxLocalLog is the most of a local run's log that logs prints without -f: its end.
const maxLocalLog = 16 << 20

// followEvery is how often logs -f reads a local run's log again.
const followEvery = 250 * time.Millisecond

// serverJob asks the server whether it has the job ref names. It reports false, with the
// reason, when no server answers (none runs, none can be reached, no token for it) or it
// has no such job: then ref may name a local run. Any other refusal is an error.
func serverJob(ctx context.Context, remote *remoteOptions, ref string) (c *client.Client, found bool, why error, err error) {
	c, err = remote.client()
	var ee *exitError
	if errors.As(err, &ee) { // no server named or found: not bad input here
		err = ee.err
	}
	if err != nil {
		return nil, false, err, nil
	}
	_, err = c.Get(ctx, ref)
	var ae *client.APIError
	switch {
	case err == nil:
		return c, true, nil, nil
	case client.IsNotFound(err), !errors.As(err, &ae):
		return nil, false, err, nil
	}
	return nil, false, nil, failed(err)
}

// findRun finds what ref names for logs and results, the same way for both: a job of the
// job server (c), else a local run under storage (dir). When both match, the server's job
// is taken, and stderr says so and how to name the local run instead.
func findRun(ctx context.Context, g *globals, remote *remoteOptions, ref, storage string) (c *client.Client, dir string, err error) {
	c, found, why, err := serverJob(ctx, remote, ref)
	if err != nil {
		return nil, "", err
	}
	dir, lerr := runFolder(ref, storage)
	switch {
	case found && lerr == nil:
		fmt.Fprintf(g.io.Err, "trainyard: %s is a job of the server at %s and a local run in %s; showing the server's job "+
			"(the local run: give its folder, %s)\n", ref, c.Address(), filepath.Dir(dir), dir)
		return c, "", nil
	case found:
		return c, "", nil
	case lerr == nil:
		return nil, dir, nil
	}
	return nil, "", failed(fmt.Errorf("%v; and %v", lerr, why))
}

// localLogs prints the log of the local run in dir: its console log, or with --rank R
// rank R's log of its last attempt; with -f it follows it until the run ends.
func localLogs(ctx context.Context, g *globals, dir string, opts logsOptions) error {
	name := filepath.Base(dir)
	rec, err := rundir.Observe(dir)
	if err != nil {
		return failed(fmt.Errorf("run %s: %w", name, err))
	}
	path := filepath.Join(dir, rundir.ConsoleLog)
	if opts.rank >= 0 {
		if len(rec.Attempts) == 0 {
			return failed(fmt.Errorf("run %s has not started an attempt yet, so rank %d has no log", name, opts.rank))
		}
		path = filepath.Join(dir, rundir.LogPath(len(rec.Attempts), opts.rank))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist) && opts.rank < 0:
		return failed(fmt.Errorf("run %s has no %s (it ran before trainyard kept one): its ranks' logs are in %s; "+
			"give --rank R", name, rundir.ConsoleLog, filepath.Join(dir, rundir.LogsDir)))
	case err != nil:
		return failed(fmt.Errorf("run %s: %w", name, err))
	}
	defer f.Close()
	offset, err := printEnd(g.io.Out, f, opts.tail)
	if err != nil || !opts.follow {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		rec, err := rundir.Observe(dir)
		ended := err == nil && !rec.Phase.Active()
		n, err := io.Copy(g.io.Out, io.NewSectionReader(f, offset, 1<<62))
		offset += n
		if err != nil || ended {
			return err
		}
		select {
		case <-ctx.Done():
			return &exitError{code: ExitInterrupted, err: fmt.Errorf("stopped following run %s; the run goes on", name)}
		case <-time.After(followEvery):
		}
	}
}

// printEnd writes the last tail lines of f (all when tail is 0) from its last
// maxLocalLog bytes, and returns the size it read up to.
func printEnd(w io.Writer, f *os.File, tail int) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := info.Size()
	from := max(0, size-maxLocalLog)
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	text := string(buf)
	if from > 0 {
		text = fmt.Sprintf("[LOG TRUNCATED: its last %d MiB follow]\n", maxLocalLog>>20) + text
	}
	_, err = io.WriteString(w, logstream.LastLines(text, tail))
	return size, err
}
