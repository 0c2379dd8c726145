package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gang"
	"github.com/trainyard/trainyard/internal/workload"
)

// Reasons of the Restarting condition and of the Events of a gang that worker 0's
// launcher restarts in place (internal/gang): its pods stay, only their processes start
// again.
const (
	// ReasonRestartingInPlace: worker 0 says the gang stops its processes, or waits for a
	// worker, before its next attempt.
	ReasonRestartingInPlace = "RestartingInPlace"
	// ReasonRestartedInPlace: the gang runs a later attempt than the one that made its
	// pods.
	ReasonRestartedInPlace = "RestartedInPlace"
)

// podsAttempt is the attempt whose Job, Service and pods the gang runs on: Attempt,
// unless the gang went on from there in place.
func (s *step) podsAttempt() int {
	if n := s.job.Status.PodsAttempt; n > 0 {
		return int(n)
	}
	return int(s.job.Status.Attempt)
}

// restartingInPlace reports whether worker 0 last said that the gang restarts in place.
func (s *step) restartingInPlace() bool {
	c := meta.FindStatusCondition(s.job.Status.Conditions, v1.CondRestarting)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonRestartingInPlace
}

// inPlace takes into the status what a summary of worker 0 (its progress, or its
// termination message) says of the gang's attempts: the attempt it reached on the same
// pods, the restarts it used, and whether it restarts now. An attempt that moved on in
// place is told in an Event.
func (s *step) inPlace(sum *workload.Summary) {
	if sum == nil || sum.Attempt == 0 {
		return // an older worker image, or none of its attempts began
	}
	s.absorbDropped(sum)
	st := &s.job.Status
	st.Restarts = max(st.Restarts, sum.Restarts)
	st.Disruptions = max(st.Disruptions, sum.Disruptions)
	if a := int32(sum.Attempt); a > st.Attempt {
		if st.PodsAttempt == 0 {
			st.PodsAttempt = st.Attempt
		}
		st.Attempt = a
		// With none in place, these are new pods whose worker 0 found later attempts in
		// run.json than the status knew of (restarts in place the operator did not see
		// before the earlier pods went): nothing to tell.
		if sum.InPlace > 0 {
			s.restartedInPlace(sum)
		}
	}
	switch {
	case sum.Outcome == workload.OutcomeRestarting && !s.restartingInPlace():
		msg := "the gang restarts in place"
		if sum.Reason != "" {
			msg = sum.Reason + "; the gang restarts in place"
		}
		st.Phase, st.Reason = v1.PhaseRestarting, msg
		s.condition(v1.CondRestarting, true, ReasonRestartingInPlace, msg)
		s.condition(v1.CondRunning, false, ReasonRestartingInPlace, msg)
		kind := corev1.EventTypeWarning
		if sum.Growing {
			kind = corev1.EventTypeNormal // a grow, not a failure
		}
		s.event(kind, ReasonRestartingInPlace, msg)
	case sum.Outcome != workload.OutcomeRestarting && s.restartingInPlace():
		s.condition(v1.CondRestarting, false, ReasonRestartedInPlace, fmt.Sprintf("attempt %d runs in place", st.Attempt))
	}
}

// restartedInPlace tells that the gang moved on to sum's attempt in place.
func (s *step) restartedInPlace(sum *workload.Summary) {
	st := &s.job.Status
	msg := fmt.Sprintf("attempt %d restarted in place", st.Attempt)
	if sum.LastRestart != "" {
		msg = sum.LastRestart
	}
	msg += fmt.Sprintf(" (%d of %d restarts used", st.Restarts-st.Disruptions, s.job.Spec.MaxRestarts)
	if st.Disruptions > 0 {
		msg += fmt.Sprintf(", and %d disruptions", st.Disruptions)
	}
	msg += fmt.Sprintf("; the pods of attempt %d stay)", st.PodsAttempt)
	st.Reason = msg
	s.event(corev1.EventTypeNormal, ReasonRestartedInPlace, msg)
}

// attemptEnded handles a worker of the gang that ended without success: the job failed
// for good when its gang said so (no restarts left in place), else the whole gang is
// restarted on new pods as before.
func (s *step) attemptEnded(ctx context.Context, f *failure) error {
	for _, p := range s.kids.podsOf(s.podsAttempt()) {
		sum := summary(&p)
		if sum == nil || sum.Final == "" {
			continue
		}
		s.inPlace(sum)
		reason := sum.Final
		if reason != gang.FinalRestarts && reason != gang.FinalDisruptions {
			reason = gang.FinalRestarts
		}
		return s.fail(reason, sum.Reason+f.unplaced)
	}
	f.reason += f.unplaced
	return s.attemptFailed(ctx, f)
}
