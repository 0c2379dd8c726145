package launcher

import (
	"cmp"
	"context"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// sameFailureScript makes every rank fail at once with the last line $LINE (or one of
// its own when LINE is unset), after both ranks started; they ignore the gang's SIGTERM,
// so each exit is its own.
const sameFailureScript = `trap '' TERM
touch "$TRAINYARD_RUN_DIR/ready-$RANK"
while [ "$(ls "$TRAINYARD_RUN_DIR" | grep -c '^ready-')" -lt "$WORLD_SIZE" ]; do sleep 0.01; done
if [ -n "$TRAINED" ]; then echo "epoch 1 done"; fi
echo "Traceback (most recent call last):"
echo "${LINE:-rank $RANK failed in its own way}"
exit 3
`

// A gang whose ranks all fail the same way at their start, before printing or reporting
// anything (an ImportError on every rank), is not restarted: that is the script, not a
// fault. Failures that differ are restarted, the same failure after the ranks printed
// is, and so is the same failure when the job's env asks for it.
func TestSameFailureIsNotRestarted(t *testing.T) {
	same := v1.EnvVar{Name: "LINE", Value: "ModuleNotFoundError: No module named 'torch'"}
	cases := map[string]struct {
		workers  int32
		env      []v1.EnvVar
		attempts int
		reason   string
	}{
		// One rank: the same failure in two attempts in a row.
		"one rank, twice alike": {workers: 1, env: []v1.EnvVar{same}, attempts: 2, reason: "not restarted"},
		"the same failure":      {env: []v1.EnvVar{same}, attempts: 1, reason: "not restarted: every rank failed the same way at its start"},
		"failures that differ":  {attempts: 3, reason: "no restarts left (max restarts 2)"},
		// A gang that failed after it printed anything (a collective's timeout, say) may
		// have met a fault: it is restarted.
		"the same failure after training": {env: []v1.EnvVar{same, {Name: "TRAINED", Value: "1"}}, attempts: 3, reason: "no restarts left"},
		"restarts asked for too":          {env: []v1.EnvVar{same, {Name: SameFailureEnv, Value: "1"}}, attempts: 3, reason: "no restarts left"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			job := makeJob(t, sameFailureScript).workers(cmp.Or(c.workers, 2)).restarts(2).grace(30).obj(t)
			job.Spec.Env = append(job.Spec.Env, c.env...)
			h := newHarness(t, job)
			res, _ := h.run(t, context.Background())
			if res.Outcome != Failed || res.Attempts != c.attempts || !strings.Contains(res.Reason, c.reason) {
				t.Errorf("result %+v; want failed after %d attempt(s), saying %q\n%s", res, c.attempts, c.reason, h.out)
			}
			if c.attempts == 1 && !strings.Contains(h.out.String(), `each saying "ModuleNotFoundError: No module named 'torch'": that is the script`) ||
				c.workers == 1 && !strings.Contains(h.out.String(), "at their start in attempts 1 and 2 alike") {
				t.Errorf("the console does not say why:\n%s", h.out)
			}
		})
	}
}
