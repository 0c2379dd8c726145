package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/internal/workload"
)

// Gangs in no Kueue queue on the node's 4 GPUs: gangs of 3 workers x 1 GPU never split
// the node between them (issue: two made together split it 2 + 2 and both failed after
// six minutes). Without the scheduler's gang scheduling, the operator places one gang at
// a time and a gang placed in part gives its room back (internal/gangroom); with it, each
// attempt's pods form a PodGroup.

// gangJob is a gang of workers x 1 GPU (the stand-in nvidia-smi mounted) that sleeps
// for seconds, in no queue.
func gangJob(t *testing.T, name string, workers, seconds int, spec, kube string) job {
	smi := standInSMI(t)
	return job{name: name, workers: workers,
		command: []string{"python3", "-c", fmt.Sprintf("import time; time.sleep(%d)", seconds)},
		spec:    "  resources: {gpu: 1}" + spec,
		mounts:  "{name: shared, mountPath: /usr/local/bin, subPath: " + filepath.Base(smi) + ", readOnly: true}",
		kube:    kube}
}

// createTogether creates the TrainJobs at the same moment, straight through the API (as
// a sweep script or two users do), and deletes them when the test ends.
func createTogether(t *testing.T, ctx context.Context, jobs ...job) {
	t.Helper()
	sharedClaim(t, ctx)
	bodies := make([][]byte, len(jobs))
	for i, j := range jobs {
		text, err := os.ReadFile(j.file(t))
		if err != nil {
			t.Fatal(err)
		}
		if bodies[i], err = yaml.YAMLToJSON(text); err != nil {
			t.Fatal(err)
		}
		deleteAtEnd(t, j.name)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i := range jobs {
		wg.Go(func() {
			errs[i] = cl.Client.CoreV1().RESTClient().Post().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs").
				Body(bodies[i]).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %s: %v", jobs[i].name, err)
		}
	}
}

// gangWatch follows gangs while they run: how long two of them at once held part of
// the room they need (bound pods, fewer than their workers), the most GPUs bound at once,
// and every status reason each had.
type gangWatch struct {
	mu        sync.Mutex
	split     time.Duration // the longest time two gangs at once were placed in part
	reasons   map[string][]string
	runningAt map[string]time.Time
	stop      func()
}

func watchGangs(t *testing.T, workers map[string]int) *gangWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &gangWatch{reasons: map[string][]string{}, runningAt: map[string]time.Time{}}
	done := make(chan struct{})
	w.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		var since time.Time
		for ctx.Err() == nil {
			partial := 0
			for name, n := range workers {
				pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: workload.LabelJob + "=" + name})
				if err != nil {
					continue
				}
				bound := 0
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded {
						bound++
					}
				}
				if bound > 0 && bound < n {
					partial++
				}
				b, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs", name).DoRaw(ctx)
				if err != nil {
					continue
				}
				var tj struct {
					Status trainJobStatus `json:"status"`
				}
				if yaml.Unmarshal(b, &tj) != nil {
					continue
				}
				w.mu.Lock()
				if r := tj.Status.Reason; r != "" && !slices.Contains(w.reasons[name], r) {
					w.reasons[name] = append(w.reasons[name], r)
				}
				if tj.Status.Phase == "Running" && w.runningAt[name].IsZero() {
					w.runningAt[name] = time.Now()
				}
				w.mu.Unlock()
			}
			w.mu.Lock()
			switch {
			case partial < 2:
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			default:
				w.split = max(w.split, time.Since(since))
			}
			w.mu.Unlock()
			time.Sleep(250 * time.Millisecond)
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// said reports whether one of the gang's reasons contains all of parts.
func (w *gangWatch) said(name string, parts ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.reasons[name], func(r string) bool {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				return false
			}
		}
		return true
	})
}

// finished waits until every job ends and checks that each succeeded with no restart but
// those it was given, and that no two gangs held part of the room at once for longer than
// a give-back takes.
func (w *gangWatch) finished(t *testing.T, timeout time.Duration, restarts map[string]int, names ...string) map[string]trainJobStatus {
	t.Helper()
	out := map[string]trainJobStatus{}
	for _, name := range names {
		s := waitStatus(t, name, timeout, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Restarts != restarts[name] {
			t.Errorf("%s: %s after %d restarts (%s); want Succeeded after %d", name, s.Phase, s.Restarts, s.Reason, restarts[name])
		}
		out[name] = s
	}
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	// Settle (3 s), then the give-back's pods going (their grace period).
	if w.split > 20*time.Second {
		t.Errorf("two gangs held part of the room at once for %s", w.split.Round(time.Second))
	}
	for _, name := range names {
		t.Logf("%s: attempt %d; reasons %q", name, out[name].Attempt, w.reasons[name])
	}
	return out
}

// eventSaid reports whether an Event of the TrainJob name has the reason and a note
// containing want.
func eventSaid(t *testing.T, ctx context.Context, name, reason, want string) bool {
	t.Helper()
	evs, err := cl.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, want) {
			return true
		}
	}
	return false
}

// gangPriorities makes the PriorityClasses gang-low and gang-high, which preempt nobody
// (the scheduler's preemption would take the lower gang's pods, which the test is not
// about), until the test ends.
func gangPriorities(t *testing.T, ctx context.Context) {
	never := corev1.PreemptNever
	for name, value := range map[string]int32{"gang-low": 100, "gang-high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, PreemptionPolicy: &never}
		if _, err := cl.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cl.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
}

func TestGangsWithoutAQueue(t *testing.T) {
	cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	installOperator(t)

	t.Run("two gangs made together both run, one after the other", func(t *testing.T) {
		w := watchGangs(t, map[string]int{"pair-a": 3, "pair-b": 3})
		createTogether(t, ctx, gangJob(t, "pair-a", 3, 10, "", ""), gangJob(t, "pair-b", 3, 10, "", ""))
		w.finished(t, 4*time.Minute, nil, "pair-a", "pair-b")
		// One waited for the other and said so: by the rules the older (the first by name,
		// in the same second), unless the operator's cache had only the other when it placed.
		if !w.said("pair-b", "gang default/pair-a") && !w.said("pair-a", "gang default/pair-b") {
			t.Errorf("neither gang said it waited for the other: %q", w.reasons)
		}
	})

	t.Run("a gang made while another's pods are made", func(t *testing.T) { madeWhilePlacing(t, ctx, "") })
	t.Run("a gang whose rank fails restarts, another waits", func(t *testing.T) { restartBeside(t, ctx, "") })

	t.Run("the gang first in line keeps what it got, and runs when room is freed", func(t *testing.T) {
		// holder runs on 2 of the 4 GPUs; short (3 workers) gets the other 2 and, first in
		// line, keeps them for its third, saying who holds the rest; it runs once holder
		// ends, in its first attempt. Its worker 0 never waits its five minutes.
		w := watchGangs(t, map[string]int{"holder": 2, "short": 3})
		createTogether(t, ctx, gangJob(t, "holder", 2, 30, "", ""))
		waitStatus(t, "holder", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		createTogether(t, ctx, gangJob(t, "short", 3, 5, "", ""))
		s := waitStatus(t, "short", time.Minute, func(s trainJobStatus) bool {
			return strings.Contains(s.Reason, "2 of its 3 workers placed, waiting for room for 1 more; gang default/holder holds 2 GPUs")
		})
		if !strings.Contains(s.Reason, "Insufficient nvidia.com/gpu") {
			t.Errorf("short: reason %q; want the scheduler's reason too", s.Reason)
		}
		got := w.finished(t, 4*time.Minute, nil, "holder", "short")
		if got["short"].Attempt != 1 {
			t.Errorf("short ran in attempt %d; want its first", got["short"].Attempt)
		}
	})

	t.Run("an elastic gang placed below its minimum waits, and runs whole once room is freed", func(t *testing.T) {
		// big runs on 3 of the 4 GPUs; elastic3 (2 to 3 workers) gets 1, fewer than its
		// minimum, and waits for 1 more; it runs once big ends.
		w := watchGangs(t, map[string]int{"big": 3, "elastic3": 3})
		createTogether(t, ctx, gangJob(t, "big", 3, 40, "", ""))
		waitStatus(t, "big", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		createTogether(t, ctx, gangJob(t, "elastic3", 3, 5, "\n  minWorkers: 2", ""))
		waitStatus(t, "elastic3", time.Minute, func(s trainJobStatus) bool {
			return strings.Contains(s.Reason, "1 of its 3 workers placed, waiting for room for 1 more")
		})
		w.finished(t, 4*time.Minute, nil, "big", "elastic3")
	})

	t.Run("a higher priority gang goes before a lower one placed in part", func(t *testing.T) {
		// blocker holds 2 GPUs; low (3 workers) gets the other 2 and waits for its third;
		// high (3 workers, a higher priority) arrives: low gives its room back, high runs
		// first once blocker ends, then low.
		gangPriorities(t, ctx)
		w := watchGangs(t, map[string]int{"blocker": 2, "low3": 3, "high3": 3})
		createTogether(t, ctx, gangJob(t, "blocker", 2, 40, "", ""))
		waitStatus(t, "blocker", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		createTogether(t, ctx, gangJob(t, "low3", 3, 5, "", "    priorityClassName: gang-low"))
		waitFor(t, "low3 placed in part", time.Minute, func() bool {
			bound := 0
			for _, p := range jobPods(t, ctx, "low3") {
				if p.Spec.NodeName != "" {
					bound++
				}
			}
			return bound == 2
		})
		createTogether(t, ctx, gangJob(t, "high3", 3, 5, "", "    priorityClassName: gang-high"))
		w.finished(t, 5*time.Minute, nil, "blocker", "high3", "low3")
		// low3 gave its room back (a status the next reconcile may replace at once: its Event).
		if got := getStatus(t, ctx, "low3"); got.Attempt < 2 || !eventSaid(t, ctx, "low3", "NoRoom", "gave back the room of its 2 placed worker(s)") {
			t.Errorf("low3 (attempt %d) has no NoRoom event saying it gave back its 2 workers' room for high3", got.Attempt)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if hi, lo := w.runningAt["high3"], w.runningAt["low3"]; hi.IsZero() || lo.IsZero() || !hi.Before(lo) {
			t.Errorf("high3 ran at %s, low3 at %s; want high3 first", hi.Format(time.TimeOnly), lo.Format(time.TimeOnly))
		}
	})
}

// madeWhilePlacing makes a gang while another's pods are made; both run (names begin with
// prefix).
func madeWhilePlacing(t *testing.T, ctx context.Context, prefix string) {
	first, then := prefix+"first", prefix+"then"
	w := watchGangs(t, map[string]int{first: 3, then: 3})
	createTogether(t, ctx, gangJob(t, first, 3, 10, "", ""))
	waitFor(t, first+"'s pods", time.Minute, func() bool { return len(jobPods(t, ctx, first)) > 0 })
	createTogether(t, ctx, gangJob(t, then, 3, 10, "", ""))
	w.finished(t, 4*time.Minute, nil, first, then)
}

// restartBeside makes, together, a gang whose rank 1 fails in attempt 1 (it restarts in
// place, on its pods, and succeeds) and another, which runs once the first is done.
func restartBeside(t *testing.T, ctx context.Context, prefix string) {
	flakyName, calmName := prefix+"flaky3", prefix+"calm"
	flaky := gangJob(t, flakyName, 3, 0, "\n  maxRestarts: 1", "")
	flaky.command = []string{"python3", "-c", "import os, sys, time; time.sleep(10); " +
		"sys.exit(3 if os.environ['TRAINYARD_ATTEMPT'] == '1' and os.environ['RANK'] == '1' else 0)"}
	w := watchGangs(t, map[string]int{flakyName: 3, calmName: 3})
	createTogether(t, ctx, flaky, gangJob(t, calmName, 3, 10, "", ""))
	w.finished(t, 5*time.Minute, map[string]int{flakyName: 1}, flakyName, calmName)
}

// With the scheduler's gang scheduling served (the API server and the scheduler
// restarted with it), each attempt's pods form a PodGroup and the scheduler binds a gang
// whole: two gangs made together both run, as do one made while another's pods are made
// and an elastic gang (minCount its minimum) waiting for room held by another. (A restart
// in place keeps its pods, and so its PodGroup: the fallback's test covers it.)
func TestGangsInPodGroups(t *testing.T) {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := c.GangScheduling(ctx, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.GangScheduling(context.Background(), false); err != nil {
			t.Errorf("serve no gang scheduling again: %v", err)
		}
	})
	installOperator(t) // after the restart: it finds PodGroups served when it starts
	w := watchGangs(t, map[string]int{"group-a": 3, "group-b": 3})
	createTogether(t, ctx, gangJob(t, "group-a", 3, 10, "", ""), gangJob(t, "group-b", 3, 10, "", ""))
	waitFor(t, "a PodGroup per gang", time.Minute, func() bool {
		b, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups").DoRaw(ctx)
		return err == nil && strings.Contains(string(b), `"name":"group-a-a1"`) && strings.Contains(string(b), `"name":"group-b-a1"`) &&
			strings.Contains(string(b), `"minCount":3`)
	})
	for _, p := range append(jobPods(t, ctx, "group-a"), jobPods(t, ctx, "group-b")...) {
		if g := p.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || !strings.HasPrefix(*g.PodGroupName, p.Labels[workload.LabelJob]+"-a") {
			t.Errorf("pod %s is in scheduling group %v; want its attempt's PodGroup", p.Name, g)
		}
	}
	w.finished(t, 4*time.Minute, nil, "group-a", "group-b")

	t.Run("a gang made while another's pods are made", func(t *testing.T) { madeWhilePlacing(t, ctx, "g-") })
	t.Run("an elastic gang waits whole for its minimum", func(t *testing.T) {
		w := watchGangs(t, map[string]int{"g-big": 3, "g-elastic": 3})
		createTogether(t, ctx, gangJob(t, "g-big", 3, 30, "", ""))
		waitStatus(t, "g-big", 2*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		createTogether(t, ctx, gangJob(t, "g-elastic", 3, 5, "\n  minWorkers: 2", ""))
		waitFor(t, "g-elastic's PodGroup of minCount 2", time.Minute, func() bool {
			b, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/g-elastic-a1").DoRaw(ctx)
			return err == nil && strings.Contains(string(b), `"minCount":2`)
		})
		for _, p := range jobPods(t, ctx, "g-elastic") {
			if p.Spec.NodeName != "" && getStatus(t, ctx, "g-big").Phase == "Running" {
				t.Errorf("pod %s of g-elastic was bound while g-big holds 3 of the 4 GPUs: fewer than its minimum of 2 fit", p.Name)
			}
		}
		w.finished(t, 4*time.Minute, nil, "g-big", "g-elastic")
	})
}
