package reporting

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/preempt"
	"github.com/trainyard/trainyard/internal/tfevents"
)

// ScratchDir is the folder of the run where the helper's new_checkpoint_dir() makes
// checkpoint folders by default (on the storage path's filesystem, so a commit is a rename).
const ScratchDir = ".scratch"

// Notifier shows Trainyard's own messages to the user (the console).
type Notifier interface {
	Notice(text string)
}

// Session is the reporting side of one run on this machine: the socket the helper reports
// to, the checkpoint committer, and the results files. Its methods are safe for concurrent
// use.
type Session struct {
	job        *v1.TrainJob
	dir        string   // the run folder's path, for messages and the helper's env
	root       *os.Root // the run folder: everything of the session goes through it
	notify     Notifier
	logger     *slog.Logger
	store      *checkpoint.Store
	committer  *checkpoint.Committer
	results    *Results
	events     *tfevents.Writer
	server     *Server
	preemption *preempt.Notice // in the socket's private folder

	mu        sync.Mutex
	touch     func(rank int)
	attempt   int
	iteration int         // the run's last iteration (rank 0's reports, across attempts)
	base      int         // the run's last iteration when this attempt began
	ranks     map[int]int // reports per rank in this attempt
	// reporters are the ranks known to report: those that reported in an attempt of this
	// session, and those of the checkpoint an attempt resumed from (Meta.Reporters). One
	// that misses a checkpoint's report keeps it from being committed (see endGroups).
	reporters map[int]bool
	// collisionTold is set once the user was told of files that several ranks wrote.
	collisionTold atomic.Bool
	here          []int // the ranks that report to this session (ranksOf), as of the attempt's start
	// groups are the checkpoints of this attempt whose ranks have not all reported yet,
	// by step (a rank's n-th report of the attempt); see shards.go.
	groups map[int]*shardGroup
	// rank0 is rank 0's latest report of this attempt: its step, metrics and time.
	rank0 struct {
		step    int
		metrics map[string]float64
		at      time.Time
	}
	lastAt time.Time // the previous rank-0 report, or the attempt's start
	total  float64   // seconds of training before this attempt
	began  time.Time // this attempt's start
	warned map[string]bool
	// flushTimer writes the TensorBoard events buffered by reports, once a second at most.
	flushTimer *time.Timer
	closed     bool

	stopWatch  chan struct{} // ends a secondary's watchCommits
	localRanks []int         // Options.Ranks
	secondary  bool          // Options.Secondary: committer and events are nil, results are read only
}

// Options tune StartWith. The zero value is the session of a run whose whole gang runs on
// this machine, as `trainyard run` has it: it commits checkpoints, writes the results, and
// cleans every rank's scratch folder before an attempt.
type Options struct {
	// Ranks, when not empty, are the ranks whose processes run on this machine: only their
	// scratch folders (.scratch/rank-R) are cleaned before an attempt, as other machines'
	// ranks may be using theirs.
	Ranks []int
	// Secondary makes the session of a worker other than worker 0 when the gang's workers
	// run on several machines that share the run folder (pods on Kubernetes). It answers
	// its ranks' reports (none of them is rank 0) and gives each attempt the latest
	// committed checkpoint, but writes and removes nothing in the run folder: worker 0's
	// session commits the checkpoints and writes the results and TensorBoard events.
	Secondary bool
	// Upload, when set, takes each committed checkpoint to where the run is kept (a bucket:
	// internal/mirror), which applies the retention policy there. The preemption notice
	// then counts a checkpoint as committed once it is uploaded.
	Upload Uploader
}

// Uploader takes the checkpoints committed in the run folder to where the run is kept.
type Uploader interface {
	// Committed uploads info in the background and then calls then with whether it is
	// committed there.
	Committed(info checkpoint.Info, then func(committed bool))
	// Highest is the highest index used there, committed or not: the run's next
	// checkpoint has a higher one, so that no two uploads use the same index.
	Highest() int
}

// Start opens the run folder's checkpoints and results and starts serving the socket. It
// is StartWith with the zero Options.
func Start(job *v1.TrainJob, root *os.Root, notify Notifier, logger *slog.Logger) (*Session, error) {
	return StartWith(job, root, notify, logger, Options{})
}

// StartWith opens the run folder's checkpoints and results as opts say and starts serving
// the socket. root is the run folder (rundir.Run.OpenRoot), whose Name is its path; the
// session reaches the folder only through it (checkpoints, results, TensorBoard events,
// scratch folders), so a folder put in its place while the run runs is never read or
// written, and closes it (Close, or when StartWith fails).
func StartWith(job *v1.TrainJob, root *os.Root, notify Notifier, logger *slog.Logger, opts Options) (*Session, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Session{job: job, dir: filepath.Clean(root.Name()), root: root, notify: notify, logger: logger,
		touch: func(int) {}, warned: map[string]bool{}, ranks: map[int]int{}, localRanks: opts.Ranks, secondary: opts.Secondary,
		groups: map[int]*shardGroup{}, here: ranksOf(&job.Spec, opts.Ranks)}
	var err error
	if opts.Secondary {
		err = s.openReadOnly()
	} else {
		err = s.open()
	}
	if err == nil {
		if last, ok := s.results.Last(); ok {
			s.iteration, s.total = last.Iteration, last.TimeTotalS
		}
		s.server, err = Listen(s, logger)
	}
	if err == nil {
		s.preemption = preempt.New(filepath.Dir(s.server.Path))
		if s.committer != nil {
			s.committer.OnCommit(s.onCommit(opts.Upload))
			if opts.Upload != nil {
				s.store.SkipTo(opts.Upload.Highest())
			}
			s.committer.OnCollision(s.collided)
		} else {
			s.stopWatch = make(chan struct{})
			go s.watchCommits(s.stopWatch)
		}
	}
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// onCommit is what the session does after a checkpoint is committed in the run folder:
// tell the preemption notice, once the checkpoint is uploaded when up is set.
func (s *Session) onCommit(up Uploader) func(checkpoint.Info) {
	if up == nil {
		return func(c checkpoint.Info) { s.preemption.Committed(c.Name, c.Manifest.Meta.Time) }
	}
	return func(c checkpoint.Info) {
		up.Committed(c, func(ok bool) {
			if ok {
				s.preemption.Committed(c.Name, c.Manifest.Meta.Time)
			}
		})
	}
}

// open opens the checkpoints for committing, and the results and events for writing.
func (s *Session) open() error {
	sub, err := s.root.OpenRoot(".")
	if err != nil {
		return fmt.Errorf("open checkpoints: %w", err)
	}
	if s.store, err = checkpoint.OpenIn(sub, s.logger); err != nil {
		return err
	}
	c := s.job.Spec.Checkpoints
	policy := checkpoint.Policy{Keep: int(c.Keep), Score: c.ScoreMetric, Order: c.ScoreOrder}
	s.committer = checkpoint.NewCommitter(s.store, policy, s.logger)
	if s.results, err = OpenResultsIn(s.root); err != nil {
		return err
	}
	if s.events, err = tfevents.CreateIn(s.root); err != nil {
		return fmt.Errorf("create TensorBoard events: %w", err)
	}
	return nil
}

// closeFiles closes what open or openReadOnly opened, and the run folder.
func (s *Session) closeFiles() error {
	var errs []error
	if s.results != nil {
		errs = append(errs, s.results.Close())
	}
	if s.events != nil {
		errs = append(errs, s.events.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	return errors.Join(append(errs, s.root.Close())...)
}

// OnActivity sets the function called with the rank of every report (the launcher's hang
// clock).
func (s *Session) OnActivity(touch func(rank int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch = touch
}

// commitPoll is how often a secondary looks for worker 0's checkpoint commit while its
// preemption notice is out.
const commitPoll = 200 * time.Millisecond

// watchCommits is a secondary's way to learn of a checkpoint committed after its notice:
// worker 0 commits it in the shared run folder, and the notice then lets this worker's
// ranks stop at once instead of at the deadline (a pod evicted alone).
func (s *Session) watchCommits(stop <-chan struct{}) {
	tick := time.NewTicker(commitPoll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		posted, ok := s.preemption.Posted()
		if !ok {
			continue
		}
		latest, _, err := s.store.Latest()
		if err == nil && !latest.Manifest.Meta.Time.Before(posted) {
			s.preemption.Committed(latest.Name, latest.Manifest.Meta.Time)
			return
		}
	}
}

// Notice is the run's preemption notice on this machine: the launcher posts it, the
// ranks read it (preempt.EnvFile), and it hears of the ranks' reports and of the
// checkpoints committed after it.
func (s *Session) Notice() *preempt.Notice { return s.preemption }

// AttemptEnv returns what the workers of an attempt need to report and to resume: the
// socket, the preemption notice's file, the process-group timeout, and the latest
// checkpoint that verifies. Newer checkpoints that do not verify are skipped with a
// notice.
func (s *Session) AttemptEnv(attempt int) (map[string]string, error) {
	env := map[string]string{
		"TRAINYARD_REPORT_SOCKET":      s.server.Path,
		preempt.EnvFile:                s.preemption.Path(),
		"TRAINYARD_PG_TIMEOUT_SECONDS": strconv.FormatInt(s.job.Spec.PGTimeout(), 10),
	}
	s.mu.Lock()
	s.endGroups() // the previous attempt's processes are gone
	s.mu.Unlock()
	latest, skipped, err := s.resumeFrom(attempt)
	if err != nil && !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return nil, fmt.Errorf("find the latest checkpoint: %w", err)
	}
	for _, e := range skipped {
		s.notice("warning: skipping a checkpoint that does not verify: %v", e)
	}
	if latest.Name != "" {
		env["TRAINYARD_CHECKPOINT"] = latest.Dir
		s.preemption.Resumes(latest.Name)
		m := latest.Manifest.Meta
		s.mu.Lock()
		s.knowReporters(m.Reporters...)
		s.mu.Unlock()
		s.notice("attempt %d: resuming from %s (iteration %d, saved in attempt %d)", attempt, latest.Name, m.Iteration, m.Attempt)
	}
	var base int
	if s.secondary {
		if base, err = iterationBefore(s.root, attempt); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attempt != 0 {
		s.total += time.Since(s.began).Seconds()
	}
	if s.secondary {
		s.iteration = base
	}
	s.attempt, s.base, s.ranks, s.began, s.lastAt = attempt, s.iteration, map[int]int{}, time.Now(), time.Now()
	s.here, s.rank0.step = ranksOf(&s.job.Spec, s.localRanks), 0
	return env, nil
}

// SetRanks changes the ranks whose processes run on this machine (Options.Ranks), from the
// next attempt (AttemptEnv) on: a Kubernetes worker renumbered when its gang went on
// without some workers (internal/gang's Start.Node).
func (s *Session) SetRanks(ranks []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.localRanks = slices.Clone(ranks)
}

// resumeFrom waits for the commit in flight, cleans the scratch folders and returns the
// latest checkpoint. A secondary takes the latest of the earlier attempts: the one worker 0
// chose, even if worker 0's rank 0 has committed more since.
func (s *Session) resumeFrom(attempt int) (checkpoint.Info, []error, error) {
	if s.secondary {
		return s.store.LatestBefore(attempt)
	}
	if err := s.committer.Wait(); err != nil {
		s.notice("the last checkpoint could not be committed: %v", err)
	}
	s.cleanScratch()
	return s.store.Latest()
}

// cleanScratch removes the checkpoint folders the helper made for an earlier attempt's
// processes (all gone now) and never handed over: everything in the run's scratch folder
// and its per-rank folders, but for folders a failed commit kept (named
// ".<name>.trainyard-<random>", as its error said), which stay for the user. With
// Options.Ranks only those ranks' folders are cleaned. It works in the run folder the
// session opened and follows no symbolic link.
func (s *Session) cleanScratch() {
	var dirs []string
	if len(s.localRanks) == 0 {
		dirs = append([]string{ScratchDir}, subdirs(s.root)...)
	}
	for _, r := range s.localRanks {
		dirs = append(dirs, filepath.Join(ScratchDir, "rank-"+strconv.Itoa(r)))
	}
	var errs []error
	for _, dir := range dirs {
		for _, e := range readDirIn(s.root, dir) {
			if strings.Contains(e.Name(), ".trainyard-") || (dir == ScratchDir && e.IsDir() && strings.HasPrefix(e.Name(), "rank-")) {
				continue
			}
			errs = append(errs, s.root.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.logger.Warn("clean scratch folders", "err", err)
	}
}

// subdirs lists the rank-N folders of the scratch folder.
func subdirs(root *os.Root) []string {
	var out []string
	for _, e := range readDirIn(root, ScratchDir) {
		if e.IsDir() && strings.HasPrefix(e.Name(), "rank-") {
			out = append(out, filepath.Join(ScratchDir, e.Name()))
		}
	}
	return out
}

// readDirIn lists the folder name in root; nothing when it is missing, a symbolic link
// or not a folder.
func readDirIn(root *os.Root, name string) []os.DirEntry {
	if info, err := root.Lstat(name); err != nil || !info.IsDir() {
		return nil
	}
	f, err := root.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	entries, _ := f.ReadDir(-1)
	return entries
}

// Report records one rank's report; it is the Server's Handler. Rank 0's metrics are the
// run's; every rank's checkpoint folder goes into the checkpoint of its step (shards.go).
func (s *Session) Report(rep Report) (Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.preemption.Heard()
	if rep.Listen {
		return Reply{}, nil
	}
	s.touch(rep.Rank)
	if rep.Rank != 0 {
		return s.reportOther(rep)
	}
	if s.secondary {
		return Reply{}, errors.New("rank 0 reports to worker 0's trainyard; this one serves other ranks only")
	}
	if err := s.committer.Err(); err != nil {
		return Reply{}, fmt.Errorf("an earlier checkpoint could not be committed: %w", err)
	}
	now := time.Now()
	step := s.ranks[0] + 1
	res := Result{Iteration: s.iteration + 1, Timestamp: now, Attempt: s.attempt, Metrics: rep.Metrics,
		TimeThisIterS: now.Sub(s.lastAt).Seconds(), TimeTotalS: s.total + now.Sub(s.began).Seconds()}
	if rep.Checkpoint != "" {
		if _, err := s.handOver(0, step, rep.Checkpoint, now); err != nil {
			return Reply{}, err
		}
	}
	s.ranks[0] = step
	s.knowReporters(0)
	s.rank0.step, s.rank0.metrics, s.rank0.at = step, rep.Metrics, now
	if g := s.groups[step]; g != nil {
		g.metrics, res.Checkpoint = rep.Metrics, g.name
		if now.Before(g.time) {
			g.time = now
		}
	}
	s.iteration, s.lastAt = res.Iteration, now
	s.record(res)
	if err := s.commitReady(); err != nil {
		return Reply{}, err
	}
	return Reply{Iteration: res.Iteration, Checkpoint: res.Checkpoint}, nil
}

// reportOther records the report of a rank other than 0: its step, and its checkpoint
// folder. s.mu is held.
func (s *Session) reportOther(rep Report) (Reply, error) {
	step := s.ranks[rep.Rank] + 1
	reply := Reply{Iteration: s.base + step} // rank 0's for the same step
	if rep.Checkpoint != "" && s.secondary {
		s.warnOnce("secondary-checkpoint", "warning: rank %d passed a checkpoint with files; on Kubernetes the files "+
			"of ranks outside worker 0's pod are not kept yet (only those of its ranks are merged)", rep.Rank)
	} else if rep.Checkpoint != "" {
		name, err := s.handOver(rep.Rank, step, rep.Checkpoint, time.Now())
		if err != nil {
			return Reply{}, err
		}
		reply.Checkpoint = name
	}
	s.ranks[rep.Rank] = step
	s.knowReporters(rep.Rank)
	if s.secondary {
		return reply, nil
	}
	return reply, s.commitReady()
}

// knowReporters adds ranks to those known to report. s.mu is held.
func (s *Session) knowReporters(ranks ...int) {
	if s.reporters == nil {
		s.reporters = map[int]bool{}
	}
	for _, r := range ranks {
		s.reporters[r] = true
	}
}

// record writes a result to the results files and TensorBoard; a failure is a notice, not
// a failure of the training.
func (s *Session) record(res Result) {
	if err := s.results.Append(res); err != nil {
		s.warnOnce("results", "warning: %v", err)
	}
	if m := s.results.Omitted(); m != "" {
		s.warnOnce("columns", "warning: %s has %d metric columns, its most; metric %q and any other new one are only in %s and TensorBoard",
			ProgressFile, MaxCSVMetrics, m, ResultFile)
	}
	if err := s.events.AddScalars(int64(res.Iteration), res.Timestamp, res.Metrics); err != nil {
		s.warnOnce("events", "warning: TensorBoard events: %v", err)
	}
	s.flushEventsSoon()
	if c := s.job.Spec.Checkpoints.ScoreMetric; c != "" && res.Checkpoint != "" {
		if _, ok := res.Metrics[c]; !ok {
			s.warnOnce("score", "warning: --checkpoint-score %s: the report of iteration %d has no metric %q (it has: %s); such checkpoints are kept",
				c, res.Iteration, c, strings.Join(metricNames([]Result{res}), ", "))
		}
	}
}

// eventsFlushEvery bounds how stale TensorBoard's view of the run gets; flushing on every
// report would cost a system call each.
const eventsFlushEvery = time.Second

// flushEventsSoon writes the buffered TensorBoard events within eventsFlushEvery. s.mu is
// held.
func (s *Session) flushEventsSoon() {
	if s.flushTimer != nil {
		return
	}
	s.flushTimer = time.AfterFunc(eventsFlushEvery, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.flushTimer = nil
		if s.closed {
			return
		}
		if err := s.events.Flush(); err != nil {
			s.warnOnce("events", "warning: TensorBoard events: %v", err)
		}
	})
}

// Summary returns what the session keeps of the run's results: how many there are, the
// last one and the last checkpoint. The results themselves are in the run folder
// (ScanResults, ReadResults, ReadElided).
func (s *Session) Summary() Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results.Summary()
}

// Close waits for the checkpoint in flight, then stops serving and closes the files. A
// checkpoint that could not be committed is an error (wrapping ErrCommit): the training
// may have ended well, but without the checkpoint the user expects.
func (s *Session) Close() error {
	var errs []error
	if s.committer != nil {
		s.mu.Lock()
		s.endGroups() // the run's processes are gone
		s.mu.Unlock()
		if err := s.committer.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrCommit, err))
		}
	}
	if s.stopWatch != nil {
		close(s.stopWatch)
	}
	serverErr := s.server.Close() // no more reports
	s.mu.Lock()
	if s.flushTimer != nil {
		s.flushTimer.Stop()
		s.flushTimer = nil
	}
	s.closed = true
	s.mu.Unlock()
	errs = append(errs, serverErr, s.closeFiles())
	return errors.Join(errs...)
}

// ErrCommit marks a checkpoint that could not be committed.
var ErrCommit = errors.New("the last checkpoint could not be committed")

func (s *Session) notice(format string, args ...any) {
	if s.notify != nil {
		s.notify.Notice(fmt.Sprintf(format, args...))
	}
}

// warnOnce shows a warning of a kind only the first time. s.mu is held.
func (s *Session) warnOnce(kind, format string, args ...any) {
	if s.warned[kind] {
		return
	}
	s.warned[kind] = true
	s.notice(format, args...)
}
