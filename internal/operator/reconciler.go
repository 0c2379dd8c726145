package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// teardownPoll is how often a reconcile looks again while an attempt's pods go away.
const teardownPoll = time.Second

// Reconciler drives TrainJobs: a headless Service and one pod per worker for each
// attempt, a lost worker's pod replaced alone, the whole gang restarted on new pods after
// a failure its launchers could not restart in place, and a status that says what
// happens.
type Reconciler struct {
	Client client.Client
	// Reader reads what the operator does not cache (PVCs) from the API server.
	Reader   client.Reader
	Recorder events.EventRecorder
	Options  Options
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Kueue is whether the cluster serves Kueue's Workloads (kueue.go): a job with a queue
	// name waits without it.
	Kueue bool
	// Progress reads a running worker 0's progress; nil means over HTTP.
	Progress func(ctx context.Context, url string) (*workload.Summary, error)
	// PodGroups is whether each attempt's pods form a PodGroup the scheduler binds whole
	// (podgroup.go): the cluster serves them and Options.GangPlacement allows it.
	PodGroups bool

	// written holds, per TrainJob UID, the attempt number of the last status this
	// reconciler wrote: a TrainJob read from the cache with an older one is stale, and acting
	// on it would bring back an attempt that was just torn down.
	written sync.Map
	// polled holds, per TrainJob UID, when its progress was last read.
	polled sync.Map
	// checked holds, per TrainJob UID, the last configCheck of a job that is starting.
	checked sync.Map
	// tensorboards holds, per TrainJob UID, whether its TensorBoard was created (true) or
	// removed after ttlSecondsAfterFinished (false), so neither is asked again.
	tensorboards sync.Map
	// uids holds each TrainJob's UID by name, to forget a deleted job's entries above.
	uids sync.Map
	// poller reads running jobs' progress outside Reconcile (set up by SetupWithManager).
	poller *poller
	// expect holds the pods created and deleted that the cache does not show yet.
	expect expectations
	// gangSecrets holds, per TrainJob UID, that its gang Secret exists.
	gangSecrets sync.Map
	// lostOn holds, per TrainJob UID, the lost node of each worker replaced since the
	// last resize (resize.go).
	lostOn sync.Map
	// shrunk holds, per TrainJob UID, the lost nodes its gang was shrunk for, to grow it
	// back when one returns (resize.go).
	shrunk sync.Map
	// room holds, per TrainJob UID, the roomMemory of a gang that looks for room with
	// probes (room.go).
	room sync.Map
	// readmitting holds, per TrainJob UID, the workers readmitted in place whose pods
	// start (growinplace.go).
	readmitting sync.Map
	// sliceWait holds, per TrainJob UID, when a gang that shrank for want of room may ask
	// Kueue for a slice again (slices.go).
	sliceWait sync.Map
	// gangs is what the operator remembers of gang placement (gangs.go).
	gangs gangMemory
}

// forget drops what the reconciler remembers of a TrainJob that is gone or going.
func (r *Reconciler) forget(key types.NamespacedName) {
	uid, ok := r.uids.LoadAndDelete(key)
	if !ok {
		return
	}
	r.written.Delete(uid)
	r.polled.Delete(uid)
	r.checked.Delete(uid)
	r.tensorboards.Delete(uid)
	r.expect.forget(uid.(types.UID))
	r.gangSecrets.Delete(uid)
	r.lostOn.Delete(uid)
	r.shrunk.Delete(uid)
	r.room.Delete(uid)
	r.readmitting.Delete(uid)
	r.sliceWait.Delete(uid)
	r.forgetGang(uid.(types.UID))
	r.roomFreed()
	if r.poller != nil {
		r.poller.forget(uid.(types.UID))
	}
}

// configCheck is what configProblem found for a job, and when.
type configCheck struct {
	at time.Time
	p  *problem
}

// configRecheck is how long what configProblem found stands: its PVC reads go to the API
// server, not the cache, so a starting job is not checked on every reconcile.
const configRecheck = 10 * time.Second

// staleRetry is how soon a reconcile that read a stale TrainJob tries again.
const staleRetry = 100 * time.Millisecond

// Reconcile brings one TrainJob one step closer to what its spec asks, with at most one
// status write.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job v1.TrainJob
	if err := r.Client.Get(ctx, req.NamespacedName, &job); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if job.DeletionTimestamp != nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil // the garbage collector removes what it owns
	}
	r.uids.Store(req.NamespacedName, job.UID)
	if w, ok := r.written.Load(job.UID); ok && job.Status.Attempt < w.(int32) {
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	s := &step{r: r, job: &job, old: job.Status.DeepCopy(), now: now()}
	err := s.run(ctx)
	if err == nil {
		s.dropStrayProbes(ctx)
	}
	if werr := s.writeStatus(ctx); werr != nil {
		if apierrors.IsConflict(werr) {
			return ctrl.Result{RequeueAfter: staleRetry}, err
		}
		err = errors.Join(err, werr)
	} else {
		s.emit()
		for _, f := range s.written {
			f()
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.after}, nil
}

// step is one reconcile of one TrainJob.
type step struct {
	r     *Reconciler
	job   *v1.TrainJob
	old   *v1.TrainJobStatus
	now   time.Time
	after time.Duration // look again this soon at the latest
	kids  children
	// workload is the job's admitted Kueue Workload, once kueueGate found it (kueue.go).
	workload *unstructured.Unstructured
	// slice is what getWorkload found of the job's Workload slices (slices.go).
	slice sliceState
	// events wait for the status write (emit).
	events []pendingEvent
	// written are run once the status is written.
	written []func()
}

// afterWrite runs f once the step's status is written (right away when it does not
// change): what must follow a recorded decision, never precede it.
func (s *step) afterWrite(f func()) { s.written = append(s.written, f) }

func (s *step) run(ctx context.Context) error {
	st := &s.job.Status
	st.ObservedGeneration = s.job.Generation
	st.RunDir = workload.RunDir(s.job)
	if g := s.job.Spec.Source; g != nil && g.Git != nil && g.Git.Revision != "" {
		st.SourceCommit = g.Git.Revision
	}
	var err error
	if s.kids, err = s.r.listChildren(ctx, s.job); err != nil {
		return err
	}
	if ok, err := s.admit(ctx); !ok || err != nil {
		return err
	}
	if err := s.tensorBoard(ctx); err != nil {
		return err
	}
	switch {
	case st.Phase.Finished():
		return s.finished(ctx)
	case s.job.Spec.Suspend:
		return s.suspend(ctx)
	case st.Phase == v1.PhaseSuspended:
		s.resume()
	case st.Attempt == 0:
		st.Attempt, st.Phase, st.StartTime = 1, v1.PhasePending, s.time()
	}
	if msg, over := s.deadlineExceeded(); over {
		return s.fail("DeadlineExceeded", msg)
	}
	if s.queueName() != "" {
		if admitted, err := s.kueueGate(ctx); !admitted || err != nil {
			return err
		}
	}
	if s.kids.before(s.podsAttempt()) {
		return s.waitTeardown(ctx)
	}
	if !s.kids.made(s.podsAttempt()) {
		if ok, err := s.placeGang(ctx); !ok || err != nil {
			return err
		}
		return s.create(ctx)
	}
	pods := s.kids.podsOf(s.podsAttempt())
	s.r.expect.settle(s.job.UID, pods)
	if pods, err = s.deleteDropped(ctx, pods); err != nil {
		return err
	}
	o := observe(pods, s.podIndexes(), s.r.nodeDown(ctx))
	return s.track(ctx, o)
}

// deadlineExceeded checks activeDeadlineSeconds.
func (s *step) deadlineExceeded() (string, bool) {
	d, start := s.job.Spec.ActiveDeadlineSeconds, s.job.Status.StartTime
	if d == nil || start == nil {
		return "", false
	}
	limit := time.Duration(*d) * time.Second
	left := start.Add(limit).Sub(s.now)
	if left > 0 {
		s.requeue(left)
		return "", false
	}
	return fmt.Sprintf("the job ran longer than activeDeadlineSeconds (%s)", limit), true
}

// create makes the current attempt's Service and its workers' pods.
func (s *step) create(ctx context.Context) error {
	st := &s.job.Status
	n := s.podsAttempt()
	if slices.ContainsFunc(s.kids.attempts(), func(a int) bool { return a > n }) {
		s.requeue(staleRetry) // a newer attempt exists: this TrainJob was read stale
		return nil
	}
	a, err := s.render(ctx, n)
	var bad *templateError
	if errors.As(err, &bad) {
		return s.fail(v1.ReasonInvalidPodTemplate, bad.Error())
	}
	if err != nil {
		return err
	}
	if err := s.networkPolicy(ctx); err != nil {
		return err
	}
	if ok, err := s.gangSecret(ctx); !ok || err != nil {
		return err
	}
	if err := s.podGroup(ctx, a); err != nil {
		return err
	}
	if err := s.r.Client.Create(ctx, a.Service); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service %s: %w", a.Service.Name, err)
	}
	made := s.podIndexes() // all but the workers dropped from the start (resized)
	if _, err := s.createPods(ctx, a, made); err != nil || st.Phase.Finished() {
		return err // or the pod policy refused them (admit passed the same spec)
	}
	msg := fmt.Sprintf("attempt %d: created Service %s and %d worker pod(s)", n, a.Service.Name, len(made))
	if q := s.queueName(); q != "" {
		msg += fmt.Sprintf(", admitted by Kueue through LocalQueue %q", q)
	}
	st.AttemptStartTime = s.time()
	st.Reason = msg
	s.condition(v1.CondCreated, true, "AttemptCreated", msg)
	s.event(corev1.EventTypeNormal, "AttemptCreated", msg)
	if a.EphemeralStorage && n == 1 {
		s.event(corev1.EventTypeWarning, "EphemeralStorage", fmt.Sprintf("no volume is mounted at the storage path %s: "+
			"checkpoints and logs live in an emptyDir and do not survive a restart; mount a PVC there with spec.kubernetes.volumes and volumeMounts",
			workload.Defaulted(s.job).Spec.StoragePath))
	}
	return nil
}

// render renders attempt n of the job, with what Kueue assigned at admission.
func (s *step) render(ctx context.Context, n int) (*workload.Attempt, error) {
	placement, err := s.kueuePlacement(ctx)
	if err != nil {
		return nil, err
	}
	opts := s.r.Options.renderOptions()
	opts.Placement, opts.Workers = placement, s.podSetSize()
	a, err := workload.Render(s.job, n, opts)
	if err != nil {
		return nil, &templateError{err}
	}
	return a, nil
}

// gangSize is the number of workers the gang runs with: what Kueue admitted of an
// elastic gang (status.workers), else spec.workers.
func (s *step) gangSize() int { return s.job.GangSize() }

// templateError is a pod template override that does not apply: the job fails.
type templateError struct{ error }

// track follows the current attempt.
func (s *step) track(ctx context.Context, o observation) error {
	st := &s.job.Status
	dropped := len(st.DroppedWorkers)
	if s.r.poller != nil {
		s.absorb(s.r.poller.take(s.job.UID)) // live progress, read outside Reconcile
	}
	s.absorb(o.summary) // a worker's final summary wins
	if len(st.DroppedWorkers) != dropped {
		s.requeue(time.Millisecond) // worker 0 dropped workers the status did not know of: look again without them
		return nil
	}
	if st.SourceCommit == "" && o.commit() != "" {
		st.SourceCommit = o.commit() // the first attempt's clone: restarts check it out
	}
	if o.failure == nil && !o.done() {
		o.failure = o.splitCommits(st.SourceCommit)
	}
	switch {
	case o.failure != nil:
		o.failure.unplaced = neverPlaced(o.stuck)
		return s.attemptEnded(ctx, o.failure)
	case o.done():
		return s.succeed()
	case len(o.lost) > 0 || len(o.missing) > 0:
		return s.replaceLost(ctx, o)
	}
	if shrunk, err := s.shrinkStuck(ctx, o); shrunk || err != nil {
		return err
	}
	st.WorkersReady = int32(o.running)
	if o.allRunning() {
		s.readmitDone()
		if grew, err := s.growThroughSlice(ctx, o); grew || err != nil {
			return err
		}
		if grew, err := s.growBack(ctx, o); grew || err != nil {
			return err
		}
		if grew, err := s.growIntoRoom(ctx, o); grew || err != nil {
			return err
		}
		if st.Workers == 0 && !s.restartingInPlace() {
			st.LostNodes = nil // the gang runs at its full size again
		}
		s.running(o)
		s.pollProgress(o.progress)
		if err := s.podsReady(ctx); err != nil { // Kueue's waitForPodsReady (kueue.go)
			return err
		}
		return s.askForSlice(ctx)
	}
	if s.readmitStarting(o) {
		return nil
	}
	return s.starting(ctx, o)
}

// running records that every worker of the attempt runs.
func (s *step) running(o observation) {
	st := &s.job.Status
	if s.restartingInPlace() {
		return // until worker 0 says the next attempt runs
	}
	msg := fmt.Sprintf("attempt %d: all %d workers running", st.Attempt, o.workers)
	if s.condition(v1.CondRunning, true, "AllWorkersRunning", msg) {
		s.event(corev1.EventTypeNormal, "Running", msg)
	}
	s.condition(v1.CondRestarting, false, "Running", msg)
	st.Phase, st.Reason = v1.PhaseRunning, msg
}

// pollProgress reads worker 0's progress into the status, once per progress interval.
func (s *step) pollProgress(url string) {
	if url == "" || s.r.poller == nil {
		return
	}
	every := s.r.Options.ProgressInterval
	if every <= 0 {
		every = DefaultProgressInterval
	}
	s.requeue(every)
	if last, ok := s.r.polled.Load(s.job.UID); ok && s.now.Sub(last.(time.Time)) < every {
		return
	}
	s.r.polled.Store(s.job.UID, s.now)
	s.r.poller.want(s.job, url)
}

// progressClient reads progress; a worker that does not answer in time is skipped.
var progressClient = &http.Client{Timeout: pollTimeout}

// readProgress reads a worker's progress over HTTP.
func readProgress(ctx context.Context, url string) (*workload.Summary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := progressClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("progress from %s: %s", url, resp.Status)
	}
	var sum workload.Summary
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&sum); err != nil {
		return nil, fmt.Errorf("progress from %s: %w", url, err)
	}
	return &sum, nil
}

// configProblem is the job's configuration problem, checked again at most every
// configRecheck.
func (s *step) configProblem(ctx context.Context) *problem {
	if c, ok := s.r.checked.Load(s.job.UID); ok && s.now.Sub(c.(configCheck).at) < configRecheck {
		return c.(configCheck).p
	}
	p := s.r.configProblem(ctx, s.job)
	s.r.checked.Store(s.job.UID, configCheck{at: s.now, p: p})
	return p
}

// starting surfaces why workers do not run yet and enforces preRunningDeadlineSeconds.
func (s *step) starting(ctx context.Context, o observation) error {
	st := &s.job.Status
	gave, waits, err := s.giveBackRoom(ctx, o)
	if gave || err != nil {
		return err
	}
	// A problem found in the configuration (a missing PVC, more GPUs than any node has) is
	// named more precisely than the scheduler's Unschedulable that follows from it; a fatal
	// one seen on the pods (an invalid image name) ends the job whatever else is wrong.
	p := o.blocked
	if p == nil || !p.fatal {
		if c := s.configProblem(ctx); c != nil {
			p = c
		}
	}
	starting := p == nil
	switch {
	case starting:
		p = &problem{reason: "Starting", message: fmt.Sprintf("attempt %d: %d of %d workers running", st.Attempt, o.running, o.workers)}
	case waits != "" && !p.fatal:
		p = &problem{reason: p.reason, message: fmt.Sprintf("attempt %d: %s; %s", st.Attempt, waits, p.message)}
	}
	if s.condition(v1.CondRunning, false, p.reason, p.message) && !starting {
		s.event(corev1.EventTypeWarning, p.reason, p.message)
	}
	st.Reason = p.message
	if p.fatal {
		return s.fail(p.reason, p.message)
	}
	d := s.job.Spec.PreRunningDeadlineSeconds
	if d == nil || st.AttemptStartTime == nil {
		return nil
	}
	limit := time.Duration(*d) * time.Second
	if left := st.AttemptStartTime.Add(limit).Sub(s.now); left > 0 {
		s.requeue(left)
		return nil
	}
	return s.fail("PreRunningDeadlineExceeded",
		fmt.Sprintf("the workers were not all running %s after attempt %d began: %s", limit, st.Attempt, p.message))
}

// attemptFailed restarts the gang, or fails the job when no restarts are left.
func (s *step) attemptFailed(ctx context.Context, f *failure) error {
	st := &s.job.Status
	n := st.Attempt
	used, limit := st.Restarts-st.Disruptions, s.job.Spec.MaxRestarts
	switch {
	case f.fatal:
		return s.fail("WorkerInputError", fmt.Sprintf("attempt %d: %s; not restarting: the same input would fail again", n, f.reason))
	case f.disruption && st.Disruptions >= s.job.Spec.DisruptionLimit():
		return s.fail("TooManyDisruptions", fmt.Sprintf("attempt %d: %s; not restarting: %d disruptions already (maxDisruptions %d)",
			n, f.reason, st.Disruptions, s.job.Spec.DisruptionLimit()))
	case f.disruption:
		st.Disruptions++
		s.event(corev1.EventTypeWarning, "WorkerDisrupted", fmt.Sprintf("attempt %d: %s", n, f.reason))
	case used < limit:
		s.event(corev1.EventTypeWarning, "WorkerFailed", fmt.Sprintf("attempt %d: %s", n, f.reason))
	default:
		return s.fail("WorkerFailed", fmt.Sprintf("attempt %d: %s; no restarts left (maxRestarts %d)", n, f.reason, limit))
	}
	// The status is written first; the next reconcile tears the attempt down (waitTeardown),
	// so a stale read can never bring it back.
	st.Restarts++
	newPods(st)
	st.Phase, st.WorkersReady, st.AttemptStartTime = v1.PhaseRestarting, 0, nil
	msg := fmt.Sprintf("attempt %d ended: %s; restarting the whole gang as attempt %d (%d of %d restarts used",
		n, f.reason, st.Attempt, st.Restarts-st.Disruptions, limit)
	if f.disruption {
		msg += "; a disruption does not count"
	}
	msg += ")"
	st.Reason = msg
	reason := "WorkerFailed"
	if f.disruption {
		reason = "WorkerDisrupted"
	}
	s.condition(v1.CondRestarting, true, reason, msg)
	s.condition(v1.CondRunning, false, "Restarting", msg)
	s.event(corev1.EventTypeNormal, "Restarting", msg)
	s.requeue(teardownPoll)
	return nil
}

// waitTeardown waits for an earlier attempt's objects to go before the next starts, so
// two gangs never hold GPUs (or the run folder) at once.
func (s *step) waitTeardown(ctx context.Context) error {
	for _, n := range s.kids.attempts() {
		if n < s.podsAttempt() {
			if err := s.r.teardown(ctx, s.job, s.kids, n); err != nil {
				return err
			}
		}
	}
	s.requeue(teardownPoll)
	return nil
}

func (s *step) succeed() error {
	st := &s.job.Status
	msg := fmt.Sprintf("all %d workers succeeded in attempt %d", s.gangSize(), st.Attempt)
	st.Phase, st.Reason, st.WorkersReady, st.CompletionTime = v1.PhaseSucceeded, msg, 0, s.time()
	s.condition(v1.CondSucceeded, true, "AllWorkersSucceeded", msg)
	s.condition(v1.CondRunning, false, "Completed", msg)
	s.condition(v1.CondRestarting, false, "Completed", msg)
	s.event(corev1.EventTypeNormal, "Succeeded", msg)
	s.afterWrite(s.r.roomFreed)
	s.ttl()
	return nil
}

// fail ends the job for good. The next reconcile (finished) stops what still runs.
func (s *step) fail(reason, msg string) error {
	st := &s.job.Status
	st.Phase, st.Reason, st.WorkersReady, st.CompletionTime = v1.PhaseFailed, msg, 0, s.time()
	s.condition(v1.CondFailed, true, reason, msg)
	s.condition(v1.CondRunning, false, reason, msg)
	s.condition(v1.CondRestarting, false, reason, msg)
	s.event(corev1.EventTypeWarning, reason, msg)
	s.afterWrite(s.r.roomFreed)
	s.ttl()
	return nil
}

// finished stops what still runs of a job that failed, so that no worker keeps holding
// GPUs, while the pods that ended stay for their logs; then it applies
// ttlSecondsAfterFinished.
func (s *step) finished(ctx context.Context) error {
	s.r.polled.Delete(s.job.UID)
	s.r.checked.Delete(s.job.UID)
	if s.r.poller != nil {
		s.r.poller.forget(s.job.UID)
	}
	if s.job.Status.Phase == v1.PhaseFailed {
		if err := s.r.stopAttempt(ctx, s.kids); err != nil {
			return err
		}
	}
	if s.queueName() != "" {
		if err := s.finishWorkload(ctx); err != nil {
			return err
		}
	}
	if !s.ttl() {
		return nil
	}
	if err := s.removeTensorBoard(ctx); err != nil {
		return err
	}
	if s.kids.empty() {
		return nil
	}
	for _, n := range s.kids.attempts() {
		if err := s.r.teardown(ctx, s.job, s.kids, n); err != nil {
			return err
		}
	}
	s.event(corev1.EventTypeNormal, "CleanedUp", fmt.Sprintf("ttlSecondsAfterFinished (%ds) passed: deleted the job's pods, Jobs and Services; its logs stay in %s",
		*s.job.Spec.TTLSecondsAfterFinished, s.job.Status.RunDir))
	s.requeue(teardownPoll)
	return nil
}

// ttl reports whether the job's time to live after finishing has passed, and otherwise
// asks to look again when it will have.
func (s *step) ttl() bool {
	t, done := s.job.Spec.TTLSecondsAfterFinished, s.job.Status.CompletionTime
	if t == nil || done == nil {
		return false
	}
	left := done.Add(time.Duration(*t) * time.Second).Sub(s.now)
	if left > 0 {
		s.requeue(left)
		return false
	}
	return true
}

// suspend stops the running attempt of a job whose spec says suspend.
func (s *step) suspend(ctx context.Context) error {
	st := &s.job.Status
	if !s.kids.empty() {
		for _, n := range s.kids.attempts() {
			if err := s.r.teardown(ctx, s.job, s.kids, n); err != nil {
				return err
			}
		}
		s.requeue(teardownPoll)
	}
	if s.queueName() != "" {
		if err := s.suspendWorkload(ctx); err != nil {
			return err
		}
	}
	if st.Phase == v1.PhaseSuspended {
		return nil
	}
	msg := "suspended: no attempt runs; set spec.suspend to false to resume from the latest checkpoint"
	if st.Attempt > 0 {
		msg = fmt.Sprintf("suspended during attempt %d: its workers were stopped; set spec.suspend to false to resume from the latest checkpoint", st.Attempt)
	}
	st.Phase, st.Reason, st.WorkersReady, st.AttemptStartTime = v1.PhaseSuspended, msg, 0, nil
	s.condition(v1.CondSuspended, true, "Suspended", msg)
	s.condition(v1.CondRunning, false, "Suspended", msg)
	s.event(corev1.EventTypeNormal, "Suspended", msg)
	s.afterWrite(s.r.roomFreed)
	return nil
}

// resume starts a new attempt of a job that was suspended.
func (s *step) resume() {
	st := &s.job.Status
	newPods(st)
	st.Phase = v1.PhasePending
	if st.StartTime == nil {
		st.StartTime = s.time()
	}
	msg := fmt.Sprintf("resumed: starting attempt %d from the latest checkpoint", st.Attempt)
	st.Reason = msg
	s.condition(v1.CondSuspended, false, "Resumed", msg)
	s.event(corev1.EventTypeNormal, "Resumed", msg)
}

// absorb copies worker 0's progress into the status, and how far its gang went in place.
func (s *step) absorb(sum *workload.Summary) {
	if sum == nil {
		return
	}
	st := &s.job.Status
	if sum.Iteration > 0 {
		st.Iteration, st.LastMetrics = sum.Iteration, sum.Metrics
	}
	if sum.Checkpoint != "" {
		st.LatestCheckpoint = sum.Checkpoint
	}
	s.inPlace(sum)
}

func (s *step) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if s.after == 0 || d < s.after {
		s.after = d
	}
}

// event queues an Event, emitted once the status is written (emit): a write that
// conflicts is retried from scratch, and would repeat it.
func (s *step) event(kind, reason, msg string) {
	s.events = append(s.events, pendingEvent{kind, reason, msg})
}

// eventNow emits an Event at once: for what the step did to another object, which stays
// done whether or not the status write that follows succeeds.
func (s *step) eventNow(kind, reason, msg string) {
	if s.r.Recorder != nil {
		s.r.Recorder.Eventf(s.job, nil, kind, reason, reason, "%s", msg)
	}
}

// pendingEvent is an Event waiting for the status write.
type pendingEvent struct{ kind, reason, msg string }

// emit records the step's Events.
func (s *step) emit() {
	if s.r.Recorder == nil {
		return
	}
	for _, e := range s.events {
		s.r.Recorder.Eventf(s.job, nil, e.kind, e.reason, e.reason, "%s", e.msg)
	}
}

// writeStatus writes the status if the step changed it: one write per reconcile.
func (s *step) writeStatus(ctx context.Context) error {
	if equality.Semantic.DeepEqual(*s.old, s.job.Status) {
		return nil
	}
	if err := s.r.Client.Status().Update(ctx, s.job); err != nil {
		return fmt.Errorf("update the status of TrainJob %s: %w", s.job.Name, err)
	}
	s.r.written.Store(s.job.UID, s.job.Status.Attempt)
	return nil
}

// attemptLabel is the attempt number of an object, or 0.
func attemptLabel(labels map[string]string) int {
	n, _ := strconv.Atoi(labels[workload.LabelAttempt])
	return n
}

// children are the objects a TrainJob's attempts consist of.
type children struct {
	services []corev1.Service
	pods     []corev1.Pod
	probes   []corev1.Pod // room probes (room.go), in no attempt
}

func (c children) empty() bool { return len(c.services)+len(c.pods) == 0 }

// made reports whether attempt n was created: its Service or a pod of it exists.
func (c children) made(n int) bool {
	return slices.ContainsFunc(c.services, func(s corev1.Service) bool { return attemptLabel(s.Labels) == n }) ||
		len(c.podsOf(n)) > 0
}

// pod is worker i's pod in attempt n, or nil.
func (c children) pod(n, i int) *corev1.Pod {
	for j := range c.pods {
		if p := &c.pods[j]; attemptLabel(p.Labels) == n && workerIndex(p) == i {
			return p
		}
	}
	return nil
}

func (c children) podsOf(n int) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range c.pods {
		if attemptLabel(p.Labels) == n {
			out = append(out, p)
		}
	}
	return out
}

// attempts lists the attempt numbers that still have objects.
func (c children) attempts() []int {
	seen := map[int]bool{}
	var out []int
	add := func(labels map[string]string) {
		if n := attemptLabel(labels); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, s := range c.services {
		add(s.Labels)
	}
	for _, p := range c.pods {
		add(p.Labels)
	}
	return out
}

// before reports whether an attempt older than n still has objects.
func (c children) before(n int) bool {
	for _, a := range c.attempts() {
		if a < n {
			return true
		}
	}
	return false
}
