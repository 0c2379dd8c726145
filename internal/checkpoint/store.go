package checkpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
)

// StagingDir is the folder inside the run folder where commits are assembled and deletions
// happen. Everything in it is a leftover once no commit runs; Open removes it.
const StagingDir = ".staging"

// ErrNoCheckpoint is returned (wrapped) by Latest when no checkpoint verifies.
var ErrNoCheckpoint = errors.New("no checkpoint")

// checkpointRE matches the name of a committed checkpoint; stagedRE that of a staged one or
// one being deleted.
var (
	checkpointRE = regexp.MustCompile(`^checkpoint_([0-9]{6,})$`)
	stagedRE     = regexp.MustCompile(`^checkpoint_([0-9]{6,})\.`)
)

// Store holds the checkpoints of one run folder. Its methods are safe for concurrent use,
// but only one Store (in one process) may use a run folder at a time.
type Store struct {
	dir     string // absolute path of the run folder
	real    string // dir with symbolic links resolved
	staging string
	logger  *slog.Logger
	// readOnly is set for a store from Inspect: Take, CommitTaken and Retain refuse.
	readOnly bool

	mu   sync.Mutex
	last int // highest index committed, staged or reserved so far

	// testHook, when set, is called after every step of a commit (see steps) and, in a
	// copy, before each file's data is copied ("copy <path>"); an error it returns fails
	// the commit there, a panic stops it as a crash would.
	testHook func(step string) error
}

// Open opens the checkpoints of the run folder runDir, which must exist. It creates
// runDir/.staging and removes what crashed commits and deletions left there.
func Open(runDir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(runDir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoints of %s: %w", runDir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoints: run folder: %w", err)
	}
	s := &Store{dir: dir, real: real, staging: filepath.Join(dir, StagingDir), logger: logger}
	if err := os.Mkdir(s.staging, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("open checkpoints: %w", err)
	}
	if fi, err := os.Lstat(s.staging); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("open checkpoints: %s is not a folder; move it away", s.staging)
	}
	if err := s.cleanStaging(); err != nil {
		return nil, err
	}
	cands, err := s.scan()
	if err != nil {
		return nil, err
	}
	if n := len(cands); n > 0 {
		s.last = max(s.last, cands[n-1].index)
	}
	return s, nil
}

// ErrReadOnly is returned (wrapped) by the methods that change a store opened by Inspect.
var ErrReadOnly = errors.New("checkpoints opened for reading only")

// Inspect returns the checkpoints of the run folder runDir, which must exist, for reading
// only (List, Latest). Unlike Open it changes nothing on disk, so a process that does not
// commit checkpoints may use it while another process commits them (a worker other than
// worker 0 of a gang whose workers share the run folder). Take, CommitTaken and Retain
// fail on it with ErrReadOnly.
func Inspect(runDir string) (*Store, error) {
	dir, err := filepath.Abs(runDir)
	if err != nil {
		return nil, fmt.Errorf("inspect checkpoints of %s: %w", runDir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("inspect checkpoints: run folder: %w", err)
	}
	return &Store{dir: dir, real: real, staging: filepath.Join(dir, StagingDir),
		logger: slog.New(slog.DiscardHandler), readOnly: true}, nil
}

// writable returns an error wrapping ErrReadOnly for a store from Inspect.
func (s *Store) writable(op string) error {
	if s.readOnly {
		return fmt.Errorf("%s in %s: %w", op, s.dir, ErrReadOnly)
	}
	return nil
}

// Dir returns the run folder.
func (s *Store) Dir() string { return s.dir }

// cleanStaging removes everything in .staging, noting the indices it held.
func (s *Store) cleanStaging() error {
	entries, err := os.ReadDir(s.staging)
	if err != nil {
		return fmt.Errorf("open checkpoints: %w", err)
	}
	for _, e := range entries {
		if m := stagedRE.FindStringSubmatch(e.Name()); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil {
				s.last = max(s.last, i)
			}
		}
		p := filepath.Join(s.staging, e.Name())
		if err := os.RemoveAll(p); err != nil {
			s.logger.Warn("cannot remove leftover of an interrupted commit", "path", p, "err", err)
			continue
		}
		s.logger.Info("removed leftover of an interrupted commit", "path", p)
	}
	return nil
}

// candidate is a folder named like a committed checkpoint.
type candidate struct {
	name  string
	index int
	dir   string
}

// scan returns the folders of the run folder named like committed checkpoints, by index.
func (s *Store) scan() ([]candidate, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var cands []candidate
	for _, e := range entries {
		m := checkpointRE.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		i, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		cands = append(cands, candidate{name: e.Name(), index: i, dir: filepath.Join(s.dir, e.Name())})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return a.index - b.index })
	return cands, nil
}

// List returns the committed checkpoints, those with a readable manifest, by index. It
// does not verify their files; Latest does.
func (s *Store) List() ([]Info, error) {
	cands, err := s.scan()
	if err != nil {
		return nil, err
	}
	var infos []Info
	for _, c := range cands {
		m, err := readManifest(c.dir)
		if err != nil {
			continue
		}
		infos = append(infos, Info{Name: c.name, Index: c.index, Dir: c.dir, Manifest: m})
	}
	return infos, nil
}

// Latest returns the newest checkpoint that verifies (see Verify), and one error for each
// newer one that was skipped, saying why ("checkpoint_000003: model.pt: size 10 bytes,
// manifest says 2048"); callers should show those as warnings. When none verifies, the
// error wraps ErrNoCheckpoint.
func (s *Store) Latest() (Info, []error, error) {
	return s.latest(nil)
}

// LatestBefore is Latest among the checkpoints saved in attempts before attempt (by their
// manifests): the one an attempt resumes from, even while checkpoints of that attempt
// are being committed.
func (s *Store) LatestBefore(attempt int) (Info, []error, error) {
	return s.latest(func(m Manifest) bool { return m.Meta.Attempt < attempt })
}

// latest returns the newest checkpoint that verifies among those whose manifest keep
// accepts (all when keep is nil).
func (s *Store) latest(keep func(Manifest) bool) (Info, []error, error) {
	cands, err := s.scan()
	if err != nil {
		return Info{}, nil, err
	}
	var skipped []error
	for i := len(cands) - 1; i >= 0; i-- {
		c := cands[i]
		if keep != nil {
			if m, err := readManifest(c.dir); err == nil && !keep(m) {
				continue
			}
		}
		m, err := Verify(c.dir)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		return Info{Name: c.name, Index: c.index, Dir: c.dir, Manifest: m}, skipped, nil
	}
	return Info{}, skipped, fmt.Errorf("%s: %w", s.dir, ErrNoCheckpoint)
}

// reserve returns the next index, which no other commit of this store will use.
func (s *Store) reserve() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	return s.last
}

// checkpointName returns the folder name of the checkpoint with the given index.
func checkpointName(index int) string {
	return fmt.Sprintf("checkpoint_%06d", index)
}

// step runs the test hook after a commit step.
func (s *Store) step(name string) error {
	if s.testHook == nil {
		return nil
	}
	if err := s.testHook(name); err != nil {
		return fmt.Errorf("after step %s: %w", name, err)
	}
	return nil
}
