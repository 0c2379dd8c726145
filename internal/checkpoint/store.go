package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
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
//
// A Store works in the run folder it opened (an os.Root), never through its path again:
// a folder put in the run folder's place while the store is open is not looked at, and
// nothing is committed into it.
type Store struct {
	dir    string // the run folder's path when opened: messages and Info.Dir
	run    *dir   // the run folder, opened
	logger *slog.Logger
	// readOnly is set for a store from Inspect: Take, CommitTaken and Retain refuse.
	readOnly bool

	mu   sync.Mutex
	last int // highest index committed, staged or reserved so far
	// staging is .staging, opened; nil for a store from Inspect. Folders it held before
	// (see currentStaging) are in stale until Close.
	staging *dir
	stale   []*dir

	// testHook, when set, is called after every step of a commit (see steps) and, in a
	// copy, before each file's data is copied ("copy <path>"); an error it returns fails
	// the commit there, a panic stops it as a crash would.
	testHook func(step string) error
}

// Open opens the checkpoints of the run folder runDir, which must exist (see OpenIn).
// runDir is looked up once, here.
func Open(runDir string, logger *slog.Logger) (*Store, error) {
	root, err := openRootPath(runDir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoints: run folder: %w", err)
	}
	return OpenIn(root, logger)
}

// openRootPath opens the folder at path (made absolute) as an os.Root.
func openRootPath(path string) (*os.Root, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return os.OpenRoot(abs)
}

// OpenIn opens the checkpoints of the run folder root, an os.Root of it whose Name is its
// path (rundir.Run.OpenRoot gives one); the store closes it (Close). It creates .staging
// and removes what crashed commits and deletions left there.
func OpenIn(root *os.Root, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	run, err := newDir(root, filepath.Clean(root.Name()))
	if err != nil {
		return nil, fmt.Errorf("open checkpoints: %w", err)
	}
	s := &Store{dir: run.path, run: run, logger: logger}
	if err := s.openStaging(); err != nil {
		run.Close()
		return nil, err
	}
	if err := s.cleanStaging(); err != nil {
		s.Close()
		return nil, err
	}
	cands, err := s.scan()
	if err != nil {
		s.Close()
		return nil, err
	}
	if n := len(cands); n > 0 {
		s.last = max(s.last, cands[n-1].index)
	}
	return s, nil
}

// openStaging creates .staging if needed and opens it; it must be a folder of this user.
func (s *Store) openStaging() error {
	staging, err := s.makeStaging()
	if err != nil {
		return fmt.Errorf("open checkpoints: %w", err)
	}
	s.staging = staging
	return nil
}

// makeStaging creates .staging in the run folder if needed and opens it.
func (s *Store) makeStaging() (*dir, error) {
	if err := s.run.root.Mkdir(StagingDir, stagingMode(s.run.root)); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	staging, info, err := s.run.openIn(StagingDir)
	if err == nil {
		if err = checkOwner(StagingDir, info); err != nil {
			staging.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("in %s: %w; move it away", s.dir, err)
	}
	return staging, nil
}

// currentStaging returns the run folder's .staging for a commit or a deletion: the one
// the store holds, or, when that is no longer .staging (someone removed it), .staging
// made and opened again.
func (s *Store) currentStaging() (*dir, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, err := s.staging.f.Stat()
	if now, lerr := s.run.root.Lstat(StagingDir); err == nil && lerr == nil && os.SameFile(held, now) {
		return s.staging, nil
	}
	staging, err := s.makeStaging()
	if err != nil {
		return nil, err
	}
	s.stale = append(s.stale, s.staging)
	s.staging = staging
	return staging, nil
}

// ErrReadOnly is returned (wrapped) by the methods that change a store opened by Inspect.
var ErrReadOnly = errors.New("checkpoints opened for reading only")

// Inspect returns the checkpoints of the run folder runDir, which must exist, for reading
// only (see InspectIn).
func Inspect(runDir string) (*Store, error) {
	root, err := openRootPath(runDir)
	if err != nil {
		return nil, fmt.Errorf("inspect checkpoints: run folder: %w", err)
	}
	return InspectIn(root)
}

// InspectIn returns the checkpoints of the run folder root (as OpenIn takes it, and
// closes it) for reading only (List, Latest). Unlike OpenIn it changes nothing on disk,
// so a process that does not commit checkpoints may use it while another process
// commits them (a worker other than worker 0 of a gang whose workers share the run
// folder). Take, CommitTaken and Retain fail on it with ErrReadOnly.
func InspectIn(root *os.Root) (*Store, error) {
	run, err := newDir(root, filepath.Clean(root.Name()))
	if err != nil {
		return nil, fmt.Errorf("inspect checkpoints: %w", err)
	}
	return &Store{dir: run.path, run: run, logger: slog.New(slog.DiscardHandler), readOnly: true}, nil
}

// Close closes the run folder. Wait for the commits in flight first (Committer.Wait).
func (s *Store) Close() error {
	err := s.run.Close()
	if s.staging != nil {
		err = errors.Join(err, s.staging.Close())
	}
	for _, d := range s.stale {
		err = errors.Join(err, d.Close())
	}
	return err
}

// writable returns an error wrapping ErrReadOnly for a store from Inspect.
func (s *Store) writable(op string) error {
	if s.readOnly {
		return fmt.Errorf("%s in %s: %w", op, s.dir, ErrReadOnly)
	}
	return nil
}

// Dir returns the run folder's path when the store opened it.
func (s *Store) Dir() string { return s.dir }

// cleanStaging removes everything in .staging, noting the indices it held.
func (s *Store) cleanStaging() error {
	entries, err := s.staging.list()
	if err != nil {
		return fmt.Errorf("open checkpoints: %w", err)
	}
	for _, e := range entries {
		if m := stagedRE.FindStringSubmatch(e.Name()); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil {
				s.last = max(s.last, i)
			}
		}
		p := filepath.Join(s.staging.path, e.Name())
		if err := s.staging.root.RemoveAll(e.Name()); err != nil {
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
}

// scan returns the folders of the run folder named like committed checkpoints, by index.
func (s *Store) scan() ([]candidate, error) {
	entries, err := s.run.list()
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
		cands = append(cands, candidate{name: e.Name(), index: i})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return a.index - b.index })
	return cands, nil
}

// open opens the committed checkpoint name: a folder (not a link) of this user.
func (s *Store) open(name string) (*dir, error) {
	d, info, err := s.run.openIn(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkOwner(name, info); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// List returns the committed checkpoints, those with a readable manifest, by index. It
// does not verify their files; Latest does. Checkpoints of another user are left out.
func (s *Store) List() ([]Info, error) {
	cands, err := s.scan()
	if err != nil {
		return nil, err
	}
	var infos []Info
	for _, c := range cands {
		d, err := s.open(c.name)
		if err != nil {
			continue
		}
		m, err := readManifest(d)
		d.Close()
		if err != nil {
			continue
		}
		infos = append(infos, s.info(c, m))
	}
	return infos, nil
}

// info returns the Info of the candidate c with manifest m.
func (s *Store) info(c candidate, m Manifest) Info {
	return Info{Name: c.name, Index: c.index, Dir: filepath.Join(s.dir, c.name), Manifest: m}
}

// Latest returns the newest checkpoint that verifies (see Verify), and one error for each
// newer one that was skipped, saying why ("checkpoint_000003: model.pt: size 10 bytes,
// manifest says 2048"; "checkpoint_000500 belongs to uid 1001 (bob), not to you"); callers
// should show those as warnings. When none verifies, the error wraps ErrNoCheckpoint.
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
		m, skip, err := s.verified(c.name, keep)
		switch {
		case skip:
			continue
		case err != nil:
			skipped = append(skipped, err)
			continue
		}
		return s.info(c, m), skipped, nil
	}
	return Info{}, skipped, fmt.Errorf("%s: %w", s.dir, ErrNoCheckpoint)
}

// verified opens and verifies the checkpoint name; skip is set when keep does not want it.
func (s *Store) verified(name string, keep func(Manifest) bool) (Manifest, bool, error) {
	d, err := s.open(name)
	if err != nil {
		return Manifest{}, false, err
	}
	defer d.Close()
	if keep != nil {
		if m, err := readManifest(d); err == nil && !keep(m) {
			return Manifest{}, true, nil
		}
	}
	m, err := verify(d, name)
	return m, false, err
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

// SkipTo makes the next checkpoint's index at least index+1: a run kept in a bucket skips
// the indices that uploads elsewhere used (internal/mirror).
func (s *Store) SkipTo(index int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = max(s.last, index)
}

// Name is the folder name of the checkpoint with the given index: checkpoint_NNNNNN.
func Name(index int) string { return checkpointName(index) }

// ParseName returns the index of a committed checkpoint's folder name, and whether name
// is one.
func ParseName(name string) (int, bool) {
	m := checkpointRE.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
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
