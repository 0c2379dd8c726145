package kubecli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/pause"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/workload"
)

// files prints (or follows) the rank logs of attempt n from the run folder, when this
// machine has it: the storage volume mounted at the workers' path, or the copy that
// --from names. why says why the pods were not asked; empty when --from chose this.
func (l *logReader) files(ctx context.Context, n int32, why string) error {
	dir, err := l.localRunDir(n)
	if err != nil {
		if why == "" {
			return err
		}
		return fmt.Errorf("%s, and %w", why, err)
	}
	if why != "" {
		l.note("%s; reading the rank logs in %s", why, dir)
		if l.opts.Since > 0 || !l.opts.SinceTime.IsZero() || l.opts.Timestamps {
			l.note("the rank logs have no timestamps: --since, --since-time and --timestamps do not apply to them")
		}
	}
	logs := filepath.Join(dir, filepath.Dir(rundir.LogPath(int(n), 0)))
	if l.opts.Follow {
		return l.followFiles(ctx, n, logs)
	}
	ranks, err := l.rankFiles(logs)
	if err != nil {
		return err
	}
	for _, r := range ranks {
		if err := l.printFile(logs, r); err != nil {
			return err
		}
	}
	return nil
}

// localRunDir finds the run folder on this machine: with --from, that folder or the run's
// folder in it; else the workers' own path (the volume mounted here at the same path).
// Its error says where the logs are kept and how to reach them.
func (l *logReader) localRunDir(n int32) (string, error) {
	runDir := l.job.Status.RunDir
	if runDir == "" {
		runDir = workload.RunDir(l.job)
	}
	logs := filepath.Dir(rundir.LogPath(int(n), 0)) // logs/attempt-N
	has := func(dir string) bool {
		st, err := os.Stat(filepath.Join(dir, logs))
		return err == nil && st.IsDir()
	}
	if l.opts.From != "" {
		for _, dir := range []string{l.opts.From, filepath.Join(l.opts.From, filepath.Base(runDir))} {
			if has(dir) {
				return dir, nil
			}
		}
		return "", fmt.Errorf("--from %s: neither it nor %s holds %s", l.opts.From, filepath.Base(runDir), logs)
	}
	if has(runDir) {
		return runDir, nil
	}
	if !storageOnVolume(&l.job.Spec) {
		return "", fmt.Errorf("its run folder %s was on the pods' own storage (no volume is mounted at the storage path), "+
			"so attempt %d's logs went with its pods", runDir, n)
	}
	return "", fmt.Errorf("attempt %d's rank logs are kept in %s on the job's storage volume, which is not mounted here: "+
		"mount it at %s, or copy the run folder here and give --from DIR", n, filepath.Join(runDir, logs), storagePath(&l.job.Spec))
}

// rankFiles returns the ranks whose logs the folder holds, in order: only --rank's when
// given, only those of -i's worker when it names one.
func (l *logReader) rankFiles(logs string) ([]int, error) {
	if l.opts.Rank >= 0 {
		if _, err := os.Stat(filepath.Join(logs, rankFile(l.opts.Rank))); err != nil {
			return nil, fmt.Errorf("no log of rank %d: %w", l.opts.Rank, err)
		}
		return []int{l.opts.Rank}, nil
	}
	entries, err := os.ReadDir(logs)
	if err != nil {
		return nil, fmt.Errorf("read the rank logs: %w", err)
	}
	var ranks []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		r, err := strconv.Atoi(strings.TrimPrefix(name, "rank-"))
		if err == nil && strings.HasPrefix(name, "rank-") && (l.worker < 0 || r/procsPerWorker(&l.job.Spec) == l.worker) {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return ranks, nil
}

// rankFile is the name of a rank's log in an attempt's folder.
func rankFile(rank int) string { return filepath.Base(rundir.LogPath(1, rank)) }

// printFile writes a rank's log (its last Tail lines), each line prefixed with the rank
// unless --rank chose it.
func (l *logReader) printFile(logs string, rank int) error {
	f, err := os.Open(filepath.Join(logs, rankFile(rank)))
	if err != nil {
		return fmt.Errorf("read the log of rank %d: %w", rank, err)
	}
	defer f.Close()
	var ring []logLine
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			text := l.fileLine(rank, strings.TrimRight(line, "\r\n"))
			if l.opts.Tail > 0 {
				if ring = append(ring, text); len(ring) > l.opts.Tail {
					ring = ring[1:]
				}
			} else if werr := l.write(text); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the log of rank %d: %w", rank, err)
		}
	}
	for _, text := range ring {
		if err := l.write(text); err != nil {
			return err
		}
	}
	return nil
}

// followFiles prints the rank logs of attempt n as they grow, until the attempt is over.
func (l *logReader) followFiles(ctx context.Context, n int32, logs string) error {
	offsets := map[int]int64{}
	partial := map[int][]byte{}
	for tick := 0; ; tick++ {
		over := false
		if tick%2 == 1 {
			job, err := l.c.GetJob(ctx, l.job.Name)
			if err != nil {
				return err
			}
			over = l.attemptOver(job, n)
		}
		ranks, err := l.rankFiles(logs)
		if err != nil && l.opts.Rank < 0 {
			return err
		}
		for _, r := range ranks {
			if err := l.readNew(logs, r, offsets, partial); err != nil {
				return err
			}
		}
		if over {
			for _, r := range slices.Sorted(maps.Keys(partial)) {
				if len(partial[r]) > 0 {
					if err := l.write(l.fileLine(r, string(partial[r]))); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := pause.For(ctx, pollInterval/2); err != nil {
			return err
		}
	}
}

// readNew writes the whole lines a rank's log gained since offsets[rank].
func (l *logReader) readNew(logs string, rank int, offsets map[int]int64, partial map[int][]byte) error {
	f, err := os.Open(filepath.Join(logs, rankFile(rank)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the log of rank %d: %w", rank, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, offsets[rank], 1<<62))
	if err != nil {
		return fmt.Errorf("read the log of rank %d: %w", rank, err)
	}
	offsets[rank] += int64(len(data))
	data = append(partial[rank], data...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if err := l.write(l.fileLine(rank, strings.TrimRight(string(data[:i]), "\r"))); err != nil {
			return err
		}
		data = data[i+1:]
	}
	partial[rank] = slices.Clone(data)
	return nil
}

// fileLine is a line of a rank's log as printed: prefixed with its rank, as the console
// prefixes it (without the pid, which the file does not keep), unless --rank chose it.
func (l *logReader) fileLine(rank int, text string) logLine {
	if l.opts.Rank >= 0 {
		return logLine{text: text}
	}
	return logLine{text: "[rank " + strconv.Itoa(rank) + "] " + text}
}
