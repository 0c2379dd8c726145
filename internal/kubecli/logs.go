package kubecli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/pause"
	"github.com/trainyard/trainyard/internal/units"
	"github.com/trainyard/trainyard/internal/workload"
)

// pollInterval is how often a follower looks again for pods, attempts and log files.
var pollInterval = time.Second

// LogOptions are the flags of 'logs --kube'. The zero value prints every rank's lines of
// the current attempt once ('logs --kube' itself asks for worker 0's, as Arena does).
type LogOptions struct {
	// Follow keeps printing as the workers print, attempt after attempt, until the job
	// ends (or, with Attempt, until that attempt ends).
	Follow bool
	// Tail prints only the last Tail lines (of each rank, from the run folder); 0 all.
	Tail int
	// Rank prints only this rank's lines; -1 every rank's.
	Rank int
	// Instance chooses one pod (Arena's -i): "worker-I" is worker I's pod of the attempt,
	// anything else the name of one of the job's pods; empty, every worker's.
	Instance string
	// Since prints only the lines of the last Since (the pod log API's sinceSeconds); 0 all.
	Since time.Duration
	// SinceTime prints only the lines from SinceTime on (sinceTime); zero all.
	SinceTime time.Time
	// Timestamps begins each line with the time the kubelet read it (the API's timestamps).
	Timestamps bool
	// Attempt is the attempt to print; 0 the current one.
	Attempt int32
	// From is a local copy of the run folder, or of the storage path that holds it, to
	// read the rank logs from instead of the pods.
	From string
}

// logReader prints the logs of one job.
type logReader struct {
	c      *Cluster
	job    *v1.TrainJob
	opts   LogOptions
	worker int         // the worker of opts.Rank or opts.Instance; -1 for all
	pod    *corev1.Pod // the pod opts.Instance names, if it names one
	out    io.Writer
	notes  io.Writer

	mu      sync.Mutex // serialises writes to out
	printed bool       // something was written to out
}

// Logs writes the logs of the TrainJob name to out: the lines of its worker pods'
// "worker" containers (each prefixed with its rank, as trainyard run prints them),
// merged in time order. When the pods are gone, or the API server cannot get their logs
// from the kubelet, it reads the rank logs in the run folder instead, if this machine
// has it (the storage volume mounted at the same path, or a copy named by From). Notes
// about where the lines come from go to notes.
func (c *Cluster) Logs(ctx context.Context, name string, opts LogOptions, out, notes io.Writer) error {
	job, err := c.GetJob(ctx, name)
	if err != nil {
		return err
	}
	l := &logReader{c: c, job: job, opts: opts, worker: -1, out: out, notes: notes}
	if err := l.check(); err != nil {
		return err
	}
	if err := l.instance(ctx); err != nil {
		return err
	}
	attempt := opts.Attempt
	if l.pod != nil { // that pod's attempt, and no other
		attempt, opts.Attempt = int32(podAttempt(l.pod)), int32(podAttempt(l.pod))
	}
	if attempt == 0 {
		attempt = job.Status.Attempt
	}
	if attempt == 0 {
		if !opts.Follow {
			return fmt.Errorf("TrainJob %s has not started an attempt yet (phase %s): no logs yet; -f waits for them", name, phase(job))
		}
		l.note("TrainJob %s has not started an attempt yet (phase %s); waiting for its first", name, phase(job))
		if attempt, err = l.nextAttempt(ctx, 0); attempt == 0 || err != nil {
			return err
		}
	}
	for {
		if err := l.attempt(ctx, attempt); err != nil || !opts.Follow || opts.Attempt > 0 {
			return err
		}
		if attempt, err = l.nextAttempt(ctx, attempt); attempt == 0 || err != nil {
			return err
		}
	}
}

// check refuses a rank or attempt the job does not have.
func (l *logReader) check() error {
	s, st := &l.job.Spec, &l.job.Status
	if l.opts.Instance != "" && l.opts.Rank >= 0 {
		return inputError("-i and --rank: give one of them (--rank R reads the pod of the worker that runs rank R)")
	}
	if l.opts.Attempt > st.Attempt {
		return inputError("--attempt %d: TrainJob %s has had %s", l.opts.Attempt, l.job.Name, units.Count(int(st.Attempt), "attempt"))
	}
	if l.opts.Rank >= 0 {
		procs := procsPerWorker(s)
		if world := l.job.GangSize() * procs; l.opts.Rank >= world {
			return inputError("--rank %d: TrainJob %s has ranks 0 to %d", l.opts.Rank, l.job.Name, world-1)
		}
		l.worker = l.opts.Rank / procs
	}
	return nil
}

// instance finds the worker, or the pod, that opts.Instance names: "worker-I", or the name
// of one of the job's pods (of any attempt). Its error names the instances there are.
func (l *logReader) instance(ctx context.Context) error {
	name := l.opts.Instance
	if name == "" {
		return nil
	}
	if w, ok := workerName(name); ok && w < l.job.GangSize() {
		l.worker = w
		return nil
	}
	pods, err := l.c.workerPods(ctx, l.job, 0)
	if err != nil {
		return err
	}
	l.pod, err = findPod(l.job, name, pods, l.opts.Attempt)
	if err != nil {
		return err
	}
	l.worker = workerIndex(l.pod)
	return nil
}

// findPod returns the pod of job that -i names among its pods; the pod must be of attempt,
// unless that is 0. Its error says which workers and pods there are.
func findPod(job *v1.TrainJob, name string, pods []corev1.Pod, attempt int32) (*corev1.Pod, error) {
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == name })
	if i < 0 || workerIndex(&pods[i]) < 0 {
		return nil, unknownInstance(job, name, pods)
	}
	p := &pods[i]
	if a := podAttempt(p); attempt > 0 && a != int(attempt) {
		return nil, inputError("-i %s: that pod is of attempt %d, not of --attempt %d", name, a, attempt)
	}
	return p, nil
}

// workerName reads "worker-I", I a worker index.
func workerName(s string) (int, bool) {
	digits, ok := strings.CutPrefix(s, "worker-")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	w, err := strconv.Atoi(digits)
	return w, err == nil
}

// maxNamedPods is the most pod names an error lists.
const maxNamedPods = 8

// unknownInstance is the error for an -i that names neither a worker of job nor one of its
// pods: it says which there are.
func unknownInstance(job *v1.TrainJob, name string, pods []corev1.Pod) error {
	n := job.GangSize()
	workers := "1 worker, worker-0"
	switch {
	case n == 2:
		workers = "2 workers, worker-0 and worker-1"
	case n > 2:
		workers = fmt.Sprintf("%d workers, worker-0 to worker-%d", n, n-1)
	}
	var names []string
	for i := range pods {
		if podAttempt(&pods[i]) == int(job.Status.PodAttempt()) {
			names = append(names, pods[i].Name)
		}
	}
	if len(names) > maxNamedPods {
		names = append(names[:maxNamedPods], fmt.Sprintf("... (%d in all)", len(names)))
	}
	podList := ""
	switch {
	case job.Status.Attempt == 0:
		podList = " and no pods yet"
	case len(names) > 0:
		podList = fmt.Sprintf(", whose pods in attempt %d are %s", job.Status.PodAttempt(), strings.Join(names, ", "))
	}
	return inputError("-i %s: TrainJob %s has %s%s; name one of them, or give --all-ranks for every worker", name, job.Name, workers, podList)
}

// attempt prints (or follows) the logs of one attempt, from its pods or its run folder.
func (l *logReader) attempt(ctx context.Context, n int32) error {
	if l.opts.From != "" {
		return l.files(ctx, n, "")
	}
	pods, err := l.c.workerPods(ctx, l.job, n)
	if err != nil {
		return err
	}
	if l.pod != nil {
		pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.UID != l.pod.UID })
	}
	over := l.attemptOver(l.job, n) || (l.pod != nil && len(pods) == 0)
	switch {
	case len(pods) == 0 && over:
		return l.files(ctx, n, fmt.Sprintf("the pods of attempt %d of %s are gone", n, l.job.Name))
	case len(pods) == 0 && !l.opts.Follow:
		return l.files(ctx, n, fmt.Sprintf("attempt %d of %s has no pods yet", n, l.job.Name))
	}
	if l.opts.Follow {
		err = l.followPods(ctx, n)
	} else {
		err = l.printPods(ctx, newestPerWorker(pods))
	}
	var un *unavailableError
	if errors.As(err, &un) && !l.printed {
		return l.files(ctx, n, un.Error())
	}
	return err
}

// attemptOver reports whether attempt n of job is over: the job moved on to another
// attempt, ended, or is suspended.
func (l *logReader) attemptOver(job *v1.TrainJob, n int32) bool {
	st := &job.Status
	return st.Attempt != n || st.Phase.Finished() || (job.Spec.Suspend && st.Phase == v1.PhaseSuspended)
}

// nextAttempt waits until the job starts an attempt after n and returns its number, or
// returns 0 when the job ends or is suspended instead.
func (l *logReader) nextAttempt(ctx context.Context, n int32) (int32, error) {
	for {
		job, err := l.c.GetJob(ctx, l.job.Name)
		if err != nil {
			return 0, err
		}
		l.job = job
		st := &job.Status
		switch {
		case st.Attempt > n:
			if n > 0 {
				l.note("attempt %d of %s started (%s)", st.Attempt, job.Name, orDash(st.Reason))
			}
			return st.Attempt, nil
		case st.Phase.Finished():
			l.note("TrainJob %s %s: %s", job.Name, strings.ToLower(string(st.Phase)), orDash(st.Reason))
			return 0, nil
		case job.Spec.Suspend && st.Phase == v1.PhaseSuspended:
			l.note("TrainJob %s is suspended", job.Name)
			return 0, nil
		}
		if err := pause.For(ctx, pollInterval); err != nil {
			return 0, err
		}
	}
}

// note writes a line about the logs, not from them.
func (l *logReader) note(format string, args ...any) {
	fmt.Fprintf(l.notes, "trainyard: "+format+"\n", args...)
}

// unavailableError is a pod whose log the API server cannot give (no kubelet to ask,
// the node gone): the run folder may still have it.
type unavailableError struct {
	pod string
	err error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("the cluster cannot give the log of pod %s (%v)", e.pod, e.err)
}
func (e *unavailableError) Unwrap() error { return e.err }

// unavailable explains the API server's refusal to give a pod's log.
func unavailable(c *Cluster, p *corev1.Pod, err error) error {
	if apierrors.IsNotFound(err) && p.Spec.NodeName != "" {
		// The API server looks up the pod's node to reach its kubelet.
		err = fmt.Errorf("its node %s is gone", p.Spec.NodeName)
	}
	return &unavailableError{pod: p.Name, err: c.explain(err)}
}

// waitingToStart reports whether err is the kubelet's answer for a container that has
// not started yet (ContainerCreating, PodInitializing, ImagePullBackOff): no log yet.
func waitingToStart(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "waiting to start")
}

// podLog opens the log of a pod's worker container.
func (l *logReader) podLog(ctx context.Context, p *corev1.Pod, opts corev1.PodLogOptions) (io.ReadCloser, error) {
	opts.Container, opts.Timestamps = workload.WorkerContainer, true
	return l.c.Core.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &opts).Stream(ctx)
}

// logLine is one line of a pod's log, with the time the kubelet read it (at, and ts as
// the kubelet wrote it; none for the run folder's lines).
type logLine struct {
	at   time.Time
	ts   string
	text string
}

// parseLogLine splits the kubelet's timestamp off a line.
func parseLogLine(s string) logLine {
	s = strings.TrimRight(s, "\r\n")
	if ts, text, ok := strings.Cut(s, " "); ok {
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			return logLine{at: at, ts: ts, text: text}
		}
	}
	return logLine{text: s}
}

// logOptions are the pod log API's options for the first read of a pod's log: --since or
// --since-time, and with every rank's lines, --tail (a rank's are filtered here, after).
func (l *logReader) logOptions() corev1.PodLogOptions {
	var opts corev1.PodLogOptions
	switch {
	case l.opts.Since > 0:
		opts.SinceSeconds = ptr(int64(math.Ceil(l.opts.Since.Seconds())))
	case !l.opts.SinceTime.IsZero():
		opts.SinceTime = &metav1.Time{Time: l.opts.SinceTime}
	}
	if l.opts.Tail > 0 && l.opts.Rank < 0 {
		opts.TailLines = ptr(int64(l.opts.Tail))
	}
	return opts
}

// wants reports whether a line is one the options ask for: with a rank, that rank's own
// lines and folded lines that include it.
func (l *logReader) wants(text string) bool {
	if l.opts.Rank < 0 {
		return true
	}
	return slices.Contains(lineRanks(text), l.opts.Rank)
}

// lineRanks reads the ranks of a console line's prefix: "[rank 3 pid 120] ...",
// "[ranks 1-3] ..." or "[ranks 1,4,7] ..."; none for trainyard's own lines.
func lineRanks(text string) []int {
	if !strings.HasPrefix(text, "[rank") {
		return nil
	}
	head, _, ok := strings.Cut(text[1:], "]")
	if !ok {
		return nil
	}
	if rest, ok := strings.CutPrefix(head, "rank "); ok {
		n, err := strconv.Atoi(strings.Fields(rest + " ")[0])
		if err != nil {
			return nil
		}
		return []int{n}
	}
	list, ok := strings.CutPrefix(head, "ranks ")
	if !ok {
		return nil
	}
	if lo, hi, ok := strings.Cut(list, "-"); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a {
			return nil
		}
		out := make([]int, 0, b-a+1)
		for r := a; r <= b; r++ {
			out = append(out, r)
		}
		return out
	}
	var out []int
	for _, f := range strings.Split(list, ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// podStream is the open log of one worker's pod, one line ahead.
type podStream struct {
	rc   io.ReadCloser
	r    *bufio.Reader
	head logLine
	ok   bool
}

// advance reads the stream's next wanted line into head.
func (s *podStream) advance(l *logReader) error {
	for {
		line, err := s.r.ReadString('\n')
		if line != "" {
			if ll := parseLogLine(line); l.wants(ll.text) {
				s.head, s.ok = ll, true
				return nil
			}
		}
		if err != nil {
			s.ok = false
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// printPods prints the logs of the newest pod of each worker once, merged in time order
// (the last Tail lines of them all).
func (l *logReader) printPods(ctx context.Context, pods map[int]*corev1.Pod) error {
	var streams []*podStream
	defer func() {
		for _, s := range streams {
			s.rc.Close()
		}
	}()
	for _, w := range slices.Sorted(maps.Keys(pods)) {
		if l.worker >= 0 && w != l.worker {
			continue
		}
		p := pods[w]
		if p.Spec.NodeName == "" {
			state, _ := podState(p)
			l.note("worker %d (pod %s) has not started: %s", w, p.Name, state)
			continue
		}
		rc, err := l.podLog(ctx, p, l.logOptions())
		switch {
		case waitingToStart(err):
			state, _ := podState(p)
			l.note("worker %d (pod %s) has not started: %s", w, p.Name, state)
			continue
		case err != nil:
			return unavailable(l.c, p, err)
		}
		s := &podStream{rc: rc, r: bufio.NewReaderSize(rc, 64<<10)}
		streams = append(streams, s)
		if err := s.advance(l); err != nil {
			return fmt.Errorf("read the log of pod %s: %w", p.Name, err)
		}
	}
	if l.worker >= 0 && pods[l.worker] == nil {
		l.note("worker %d of attempt %d has no pod", l.worker, l.job.Status.Attempt)
	}
	return l.merge(streams)
}

// merge writes the streams' lines in time order, keeping only the last Tail.
func (l *logReader) merge(streams []*podStream) error {
	var ring []logLine
	for {
		var next *podStream
		for _, s := range streams {
			if s.ok && (next == nil || s.head.at.Before(next.head.at)) {
				next = s
			}
		}
		if next == nil {
			break
		}
		if l.opts.Tail > 0 {
			ring = append(ring, next.head)
			if len(ring) > l.opts.Tail {
				ring = ring[1:]
			}
		} else if err := l.write(next.head); err != nil {
			return err
		}
		if err := next.advance(l); err != nil {
			return err
		}
	}
	for _, line := range ring {
		if err := l.write(line); err != nil {
			return err
		}
	}
	return nil
}

// write writes one line to out, with --timestamps after the kubelet's time of it.
func (l *logReader) write(line logLine) error {
	text := line.text + "\n"
	if l.opts.Timestamps && line.ts != "" {
		text = line.ts + " " + text
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.printed = true
	_, err := io.WriteString(l.out, text)
	return err
}

// followPods follows the worker pods of attempt n until each worker's container has
// ended (or the attempt is over before a worker's pod appeared).
func (l *logReader) followPods(ctx context.Context, n int32) error {
	workers := []int{l.worker}
	if l.worker < 0 {
		workers = make([]int, l.job.GangSize())
		for i := range workers {
			workers[i] = i
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			if errs[i] = l.followWorker(ctx, n, w); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// followWorker follows one worker's pod of attempt n: it waits for the pod and for its
// container to start, prints its lines as they come, and reconnects (from the last line's
// time) when the stream ends while the container still runs.
func (l *logReader) followWorker(ctx context.Context, n int32, w int) error {
	var since time.Time // the time of the last line printed
	told := ""
	for {
		p, err := l.waitForPod(ctx, n, w)
		if p == nil || err != nil {
			return err
		}
		if p.Spec.NodeName == "" { // not scheduled: the API server answers with an empty log
			if told, err = l.waitToStart(ctx, w, p, told); err != nil {
				return err
			}
			continue
		}
		opts := l.logOptions()
		if !since.IsZero() { // a reconnection: from the last line printed
			opts = corev1.PodLogOptions{SinceTime: &metav1.Time{Time: since}}
		}
		opts.Follow = true
		rc, err := l.podLog(ctx, p, opts)
		switch {
		case waitingToStart(err):
			if told, err = l.waitToStart(ctx, w, p, told); err != nil {
				return err
			}
			continue
		case err != nil:
			return unavailable(l.c, p, err)
		}
		last, err := l.copyLines(rc, since)
		rc.Close()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("read the log of pod %s: %w", p.Name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		since = last
		if ended, err := l.containerEnded(ctx, p); ended || err != nil {
			return err
		}
		if err := pause.For(ctx, pollInterval); err != nil {
			return err
		}
	}
}

// waitToStart notes once per state that worker w's pod has not started, and waits a
// while. It returns the state noted.
func (l *logReader) waitToStart(ctx context.Context, w int, p *corev1.Pod, told string) (string, error) {
	if state, _ := podState(p); state != told {
		l.note("worker %d (pod %s) is waiting to start: %s", w, p.Name, state)
		told = state
	}
	return told, pause.For(ctx, pollInterval)
}

// copyLines writes the wanted lines of a log stream, skipping those not after since
// (already printed before a reconnection), and returns the last line's time.
func (l *logReader) copyLines(rc io.Reader, since time.Time) (time.Time, error) {
	r := bufio.NewReaderSize(rc, 64<<10)
	last := since
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			ll := parseLogLine(line)
			if since.IsZero() || ll.at.After(since) {
				if !ll.at.IsZero() {
					last = ll.at
				}
				if l.wants(ll.text) {
					if werr := l.write(ll); werr != nil {
						return last, werr
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return last, err
		}
	}
}

// waitForPod returns the newest pod of worker w in attempt n (the pod -i names, if it
// names one), waiting for it to appear; nil when the attempt is over without one, or the
// pod named is gone.
func (l *logReader) waitForPod(ctx context.Context, n int32, w int) (*corev1.Pod, error) {
	for {
		pods, err := l.c.workerPods(ctx, l.job, n)
		if err != nil {
			return nil, err
		}
		if l.pod != nil {
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.UID == l.pod.UID })
			if i < 0 {
				return nil, nil
			}
			return &pods[i], nil
		}
		if p := newestPerWorker(pods)[w]; p != nil {
			return p, nil
		}
		job, err := l.c.GetJob(ctx, l.job.Name)
		if err != nil {
			return nil, err
		}
		if l.attemptOver(job, n) {
			return nil, nil
		}
		if err := pause.For(ctx, pollInterval); err != nil {
			return nil, err
		}
	}
}

// containerEnded reports whether a pod's worker container has ended for good (or the pod
// is gone), so that its log will not grow.
func (l *logReader) containerEnded(ctx context.Context, p *corev1.Pod) (bool, error) {
	cur, err := l.c.Core.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, l.c.explain(err)
	case cur.UID != p.UID || terminated(cur) || cur.DeletionTimestamp != nil:
		return true, nil
	}
	s := workerStatus(cur)
	return s != nil && s.State.Terminated != nil && cur.Spec.RestartPolicy == corev1.RestartPolicyNever, nil
}

func ptr[T any](v T) *T { return &v }
