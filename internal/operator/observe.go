package operator

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/internal/workload"
)

// observation is what an attempt's pods say about it.
type observation struct {
	workers   int
	indexes   []int // the workers' indexes (see observe)
	running   int   // workers whose container runs
	succeeded int
	failure   *failure // the first worker that failed in a way its pod cannot be replaced for
	// lost are workers whose pod is gone from the gang or going (evicted, OOM-killed, its
	// node lost, deleted, left on SIGTERM): each is replaced, keeping its index and host
	// name, while the others wait for it.
	lost []*failure
	// missing are the indexes of workers that have no pod: not made yet, or gone.
	missing []int
	blocked *problem // why a worker does not start, if it does not
	// stuck are the workers of the gang whose pod the scheduler cannot place (resize.go).
	stuck    []stuckWorker
	summary  *workload.Summary
	progress string // where worker 0 serves its progress, while it runs
	// clones are the commits of the job's git source the workers' init containers
	// cloned, in worker order.
	clones []clone
}

// clone is the commit a worker's init container checked out.
type clone struct {
	worker      int
	pod, commit string
}

// failure is a worker that ended the attempt.
type failure struct {
	worker int
	pod    string
	reason string
	// disruption is an eviction or preemption: not the user's code failing.
	disruption bool
	// fatal is a worker that refused its input (`trainyard worker` exit code 2: a command
	// missing from the image, too few GPUs): a restart would fail the same way.
	fatal bool
	// deleting: the pod is being deleted already (by us, an eviction, a user).
	deleting bool
	// nodeDown: the pod's node is not ready, so no kubelet will confirm the pod's end: it
	// is deleted at once (grace period 0).
	nodeDown bool
	// unplaced says which workers' pods the scheduler never placed, and why, when the
	// attempt ended with some: a worker that never connected was waiting for room.
	unplaced string
}

// exitBadInput is `trainyard worker`'s exit code for input no restart can fix.
const exitBadInput = 2

// problem is why a worker's pod does not start.
type problem struct {
	reason, message string
	// fatal problems will not go away by waiting (a malformed image name).
	fatal bool
}

// waitingReasons are container waiting reasons that mean a pod will not start on its own.
var waitingReasons = map[string]bool{
	"ErrImagePull": false, "ImagePullBackOff": false, "InvalidImageName": true,
	"CreateContainerConfigError": false, "CreateContainerError": false, "RunContainerError": false,
	"ErrImageNeverPull": true, "CrashLoopBackOff": false,
}

// disruptionReasons are pod status reasons of pods the node or the cluster took away.
var disruptionReasons = []string{"Evicted", "Preempting", "Preempted", "Shutdown", "NodeShutdown", "NodeLost", "Terminated", "DeadlineExceeded"}

// observe sums up an attempt from the pods of its workers, whose indexes are given (all
// of the pods' attempt but those dropped in place); nodeDown says whether a node is lost
// (not ready, or gone).
func observe(pods []corev1.Pod, indexes []int, nodeDown func(string) bool) observation {
	o := observation{workers: len(indexes), indexes: indexes}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return workerIndex(&a) - workerIndex(&b) })
	present := map[int]bool{}
	for i := range pods {
		p := &pods[i]
		present[workerIndex(p)] = true
		o.add(p, nodeDown(p.Spec.NodeName))
		if c := clonedCommit(p); c != "" {
			o.clones = append(o.clones, clone{worker: workerIndex(p), pod: p.Name, commit: c})
		}
		if workerIndex(p) == 0 {
			if s := summary(p); s != nil {
				o.summary = s
			}
			o.progress = progressURL(p)
		}
	}
	for _, i := range indexes {
		if !present[i] {
			o.missing = append(o.missing, i)
		}
	}
	return o
}

// add counts one worker's pod.
func (o *observation) add(p *corev1.Pod, nodeDown bool) {
	sum := summary(p)
	final := sum != nil && sum.Final != ""
	switch {
	case p.DeletionTimestamp != nil:
		f := lostPod(p, "is being deleted")
		f.deleting, f.nodeDown = !nodeDown, nodeDown
		o.lost = append(o.lost, f)
	case p.Status.Phase == corev1.PodSucceeded && sum != nil && sum.Outcome == "interrupted" && !final:
		o.lost = append(o.lost, lostPod(p, "left the gang: "+sum.Reason))
	case p.Status.Phase == corev1.PodSucceeded:
		o.succeeded++
	case (p.Status.Phase == corev1.PodFailed || isDisrupted(p)) && !final && replaceable(p):
		o.lost = append(o.lost, podFailure(p))
	case p.Status.Phase == corev1.PodFailed || isDisrupted(p):
		if o.failure == nil {
			o.failure = podFailure(p)
		}
	case nodeDown && p.Spec.NodeName != "":
		f := lostPod(p, "is on node "+p.Spec.NodeName+", which is lost (not ready)")
		f.nodeDown, f.disruption = true, true
		o.lost = append(o.lost, f)
	case p.Status.Phase == corev1.PodRunning:
		o.running++
	default:
		if o.blocked == nil {
			o.blocked = podProblem(p)
		}
		if w, ok := unschedulable(p); ok && slices.Contains(o.indexes, w.worker) {
			o.stuck = append(o.stuck, w)
		}
	}
}

// replaceable reports whether a pod that ended ended because of where it ran, not of
// what it ran: evicted, preempted, its node shut down, killed for memory. Its worker is
// replaced alone; the others wait for it.
func replaceable(p *corev1.Pod) bool {
	if isDisrupted(p) || slices.Contains(disruptionReasons, p.Status.Reason) {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == workload.WorkerContainer && t != nil && t.Reason == "OOMKilled" {
			return true
		}
	}
	return false
}

// lostPod is a worker whose pod is going away for the reason what says.
func lostPod(p *corev1.Pod, what string) *failure {
	f := &failure{worker: workerIndex(p), pod: p.Name, disruption: true}
	f.reason = fmt.Sprintf("worker %d (pod %s", f.worker, p.Name)
	if p.Spec.NodeName != "" {
		f.reason += " on " + p.Spec.NodeName
	}
	f.reason += ") " + what
	return f
}

// done reports whether every worker succeeded.
func (o observation) done() bool { return o.succeeded >= o.workers && o.failure == nil }

// allRunning reports whether every worker has started (running or already done).
func (o observation) allRunning() bool { return o.running+o.succeeded >= o.workers }

func workerIndex(p *corev1.Pod) int { return workload.WorkerIndex(p.Labels) }

func isDisrupted(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podFailure(p *corev1.Pod) *failure {
	f := &failure{worker: workerIndex(p), pod: p.Name}
	where := fmt.Sprintf("worker %d (pod %s", f.worker, p.Name)
	if p.Spec.NodeName != "" {
		where += " on " + p.Spec.NodeName
	}
	where += ")"
	if isDisrupted(p) || slices.Contains(disruptionReasons, p.Status.Reason) {
		f.disruption = true
		f.reason = where + " was " + disruptionText(p)
		return f
	}
	f.reason = where + " " + exitText(p)
	f.fatal = badInput(p)
	return f
}

// commit is the commit the lowest worker that has cloned the job's git source cloned, or "".
func (o observation) commit() string {
	if len(o.clones) == 0 {
		return ""
	}
	return o.clones[0].commit
}

// splitCommits is the failure of an attempt whose workers cloned different commits of
// the branch (it moved while they started, in a job whose revision is not pinned), or
// nil. It is a disruption: the gang restarts on pinned, the commit the status records.
func (o observation) splitCommits(pinned string) *failure {
	for _, c := range o.clones {
		if c.commit == o.clones[0].commit {
			continue
		}
		first := o.clones[0]
		return &failure{worker: c.worker, pod: c.pod, disruption: true,
			reason: fmt.Sprintf("the workers cloned different commits of the branch (it moved while they started): "+
				"worker %d %.12s, worker %d %.12s; restarting the gang on %.12s (set spec.source.git.revision to pin a commit)",
				first.worker, first.commit, c.worker, c.commit, pinned)}
	}
	return nil
}

// clonedCommit is the commit the pod's init container cloned, from its termination message.
func clonedCommit(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; cs.Name == workload.InitContainer && t != nil && t.ExitCode == 0 {
			if c, ok := strings.CutPrefix(t.Message, workload.CommitPrefix); ok {
				return strings.TrimSpace(c)
			}
		}
	}
	return ""
}

// initFailure is the init container's failure (it copies the binary and clones the code),
// if it failed; fatal when it refused its input (an unknown branch, refused credentials).
func initFailure(p *corev1.Pod) (string, bool, bool) {
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; cs.Name == workload.InitContainer && t != nil && t.ExitCode != 0 {
			msg := strings.TrimSpace(t.Message)
			if msg == "" {
				msg = fmt.Sprintf("exited with code %d", t.ExitCode)
			}
			return "its init container " + workload.InitContainer + " failed: " + msg, t.ExitCode == exitBadInput, true
		}
	}
	return "", false, false
}

// badInput reports whether the worker container exited with exitBadInput and left a
// summary, so that the code is trainyard's and not the user's program's, or the init
// container refused its input.
func badInput(p *corev1.Pod) bool {
	if _, fatal, failed := initFailure(p); failed {
		return fatal
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == workload.WorkerContainer && t != nil && t.ExitCode == exitBadInput {
			_, err := workload.DecodeSummary(t.Message)
			return err == nil
		}
	}
	return false
}

func disruptionText(p *corev1.Pod) string {
	msg := p.Status.Message
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			if msg == "" {
				msg = c.Message
			}
			return "disrupted (" + c.Reason + "): " + msg
		}
	}
	return strings.ToLower(p.Status.Reason) + ": " + msg
}

// exitText describes how the worker container ended: its summary's reason when it left
// one, else its exit code.
func exitText(p *corev1.Pod) string {
	if text, _, failed := initFailure(p); failed {
		return text
	}
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if cs.Name != workload.WorkerContainer || t == nil {
			continue
		}
		if s, err := workload.DecodeSummary(t.Message); err == nil && s.Reason != "" {
			return "failed: " + s.Reason
		}
		text := fmt.Sprintf("exited with code %d", t.ExitCode)
		if t.Reason != "" && t.Reason != "Error" {
			text += " (" + t.Reason + ")"
		}
		return text
	}
	if p.Status.Message != "" {
		return "failed: " + p.Status.Message
	}
	return "failed"
}

// podProblem says why a pending pod does not start, or nil when it is on its way.
func podProblem(p *corev1.Pod) *problem {
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		if fatal, ok := waitingReasons[w.Reason]; ok {
			return &problem{reason: w.Reason, fatal: fatal,
				message: fmt.Sprintf("worker %d (pod %s), container %s: %s", workerIndex(p), p.Name, cs.Name, w.Message)}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &problem{reason: "Unschedulable",
				message: fmt.Sprintf("worker %d (pod %s) cannot be scheduled: %s", workerIndex(p), p.Name, c.Message)}
		}
	}
	return nil
}

// summary is the Summary a worker left in its termination message, if any.
func summary(p *corev1.Pod) *workload.Summary {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == workload.WorkerContainer && cs.State.Terminated != nil {
			if s, err := workload.DecodeSummary(cs.State.Terminated.Message); err == nil {
				return &s
			}
		}
	}
	return nil
}

// progressURL is where a running worker 0 serves its progress, or "".
func progressURL(p *corev1.Pod) string {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return ""
	}
	port := int32(workload.ProgressPort)
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if c.Name == workload.WorkerContainer && cp.Name == "progress" {
				port = cp.ContainerPort
			}
		}
	}
	return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port))) + workload.ProgressPath
}
