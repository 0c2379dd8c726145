package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/checkpoint"
)

// method is one way of making a checkpoint durable on the disk.
type method string

const (
	renamePath method = "rename" // commit of a folder on the disk
	copyPath   method = "copy"   // commit of a folder on scratch
	cpR        method = "cp"     // cp -r from scratch, then sync -f
)

var methods = []method{renamePath, copyPath, cpR}

// result is the timing of one trial.
type result struct {
	method method
	size   int64
	round  int
	take   time.Duration // rename and copy: until Take returned
	total  time.Duration // rename and copy: the whole commit; cp: cp -r alone
	synced time.Duration // cp: cp -r plus sync -f
	rm     time.Duration // cp: cp -r, sync -f, then removing the source (the commit removes it too)
}

// line describes the result for the progress output.
func (r result) line() string {
	if r.method == cpR {
		return fmt.Sprintf("%-7s %-8s cp -r %8.1f ms  + sync %8.1f ms  + rm source %8.1f ms", r.method,
			sizeName(r.size), ms(r.total), ms(r.synced), ms(r.rm))
	}
	return fmt.Sprintf("%-7s %-8s take %9.3f ms  commit %8.1f ms  %7.0f MB/s", r.method, sizeName(r.size),
		ms(r.take), ms(r.total), mbps(r.size, r.total))
}

// runTrial prepares a source folder of the given size, times the method on it and
// removes everything the trial made. Preparation is not timed; it starts with a sync, so
// that no earlier trial's writes are still being flushed.
func runTrial(cfg *config, m method, size int64) (result, error) {
	res := result{method: m, size: size}
	srcParent := cfg.shm
	if m == renamePath {
		srcParent = cfg.root
	}
	trial, err := trialDir(cfg.root, "trial-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(trial)
	srcDir, err := trialDir(srcParent, "src-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(srcDir)
	src := filepath.Join(srcDir, "checkpoint")
	unix.Sync()
	if err := writeSource(src, size, cfg.files); err != nil {
		return res, err
	}
	if m == cpR {
		return timeCp(res, src, filepath.Join(trial, "copy"))
	}
	return timeCommit(res, src, trial)
}

// timeCommit commits src into a new store in the run folder runDir.
func timeCommit(res result, src, runDir string) (result, error) {
	store, err := checkpoint.Open(runDir, slog.New(slog.DiscardHandler))
	if err != nil {
		return res, err
	}
	start := time.Now()
	taken, err := store.Take(src)
	if err != nil {
		return res, err
	}
	res.take = time.Since(start)
	info, err := store.CommitTaken(taken, checkpoint.Meta{Iteration: 1, Time: start})
	if err != nil {
		return res, err
	}
	res.total = time.Since(start)
	var n int64
	for _, f := range info.Manifest.Files {
		n += f.Size
	}
	if n != res.size {
		return res, fmt.Errorf("%s committed %d bytes, want %d", res.method, n, res.size)
	}
	return res, nil
}

// timeCp runs cp -r src dst, then sync -f dst, then removes src.
func timeCp(res result, src, dst string) (result, error) {
	start := time.Now()
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		return res, fmt.Errorf("cp -r: %v: %s", err, out)
	}
	res.total = time.Since(start)
	if out, err := exec.Command("sync", "-f", dst).CombinedOutput(); err != nil {
		return res, fmt.Errorf("sync -f: %v: %s", err, out)
	}
	res.synced = time.Since(start)
	if err := os.RemoveAll(src); err != nil {
		return res, fmt.Errorf("remove source: %w", err)
	}
	res.rm = time.Since(start)
	return res, nil
}

// writeSource writes a checkpoint folder of the given size in files files (half in a
// subfolder), as torch.save would: written, closed, not synced.
func writeSource(dir string, size int64, files int) error {
	block := make([]byte, 4<<20)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(block)
	for i := range files {
		name := filepath.Join(dir, fmt.Sprintf("model-%d.pt", i))
		if i%2 == 1 {
			name = filepath.Join(dir, "optim", fmt.Sprintf("state-%d.pt", i))
		}
		n := size / int64(files)
		if i == files-1 {
			n = size - n*int64(files-1)
		}
		if err := writeFile(name, n, block); err != nil {
			return fmt.Errorf("write source: %w", err)
		}
	}
	return nil
}

// writeFile writes n bytes, repeating block, to a new file.
func writeFile(name string, n int64, block []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	for n > 0 {
		k := min(n, int64(len(block)))
		if _, err := f.Write(block[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	return f.Close()
}

// sameFilesystem reports whether a and b are on the same filesystem.
func sameFilesystem(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, err
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, err
	}
	return sa.Dev == sb.Dev, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mbps is the throughput of n bytes in d, in MB/s (10^6 bytes).
func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}
