package kubecli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// What 'list --kube' and 'top job --kube' show as NODE: the node of worker 0's pod of the
// current attempt, not an earlier attempt's nor an earlier job's of the same name.
func TestWorkerZeroNodes(t *testing.T) {
	job := running() // attempt 2
	waiting := makeJob("resnet").workers(2).status(v1.TrainJobStatus{Phase: v1.PhaseRunning, Attempt: 1}).obj()
	fresh := makeJob("vit").obj()
	pod := func(j *v1.TrainJob, attempt, worker int, node string, age time.Duration) corev1.Pod {
		p := workerPod(j, worker, node, corev1.ContainerState{})
		p.Labels[workload.LabelAttempt] = string(rune('0' + attempt))
		p.Labels[workload.LabelJobUID] = string(j.UID)
		p.CreationTimestamp = ago(age)
		return p
	}
	stale := pod(&job, 2, 0, "gpu-9", time.Hour)
	stale.Labels[workload.LabelJobUID] = "uid-of-an-earlier-bert-large"
	pods := []corev1.Pod{
		pod(&job, 1, 0, "gpu-7", 2*time.Hour),    // attempt 1
		pod(&job, 2, 0, "gpu-3", 30*time.Minute), // replaced by the next
		pod(&job, 2, 0, "gpu-1", 10*time.Minute),
		pod(&job, 2, 1, "gpu-2", 10*time.Minute), // worker 1
		stale,
		pod(&waiting, 1, 0, "", time.Minute), // not scheduled
	}
	got := workerZeroNodes([]v1.TrainJob{job, waiting, fresh}, pods)
	if diff := cmp.Diff(WorkerNodes{"team-a/bert-large": "gpu-1", "team-a/resnet": ""}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for j, want := range map[*v1.TrainJob]string{&job: "gpu-1", &waiting: "N/A", &fresh: "N/A"} {
		if n := got.of(j); n != want {
			t.Errorf("node of %s: %q, want %q", j.Name, n, want)
		}
	}
}

func TestTrainingDuration(t *testing.T) {
	start, end := ago(3*time.Hour), ago(time.Hour)
	cases := map[string]struct {
		st   v1.TrainJobStatus
		want string
	}{
		"not started": {st: v1.TrainJobStatus{Phase: v1.PhasePending}, want: "N/A (not started)"},
		"running":     {st: v1.TrainJobStatus{Phase: v1.PhaseRunning, StartTime: &start}, want: "3h"},
		"completed":   {st: v1.TrainJobStatus{Phase: v1.PhaseSucceeded, StartTime: &start, CompletionTime: &end}, want: "120m"},
		"failed without a completion time: until its last condition changed": {st: v1.TrainJobStatus{Phase: v1.PhaseFailed,
			StartTime: &start, Conditions: []metav1.Condition{{Type: v1.CondFailed, LastTransitionTime: ago(90 * time.Minute)},
				{Type: v1.CondCreated, LastTransitionTime: ago(170 * time.Minute)}}}, want: "90m"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := makeJob("bert").status(tc.st).obj()
			v, _ := testView(false)
			if got := trainingDuration(v, &j); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRankRange(t *testing.T) {
	four := makeJob("a").gpus(4).obj()
	one := makeJob("b").obj()
	for _, tc := range []struct {
		spec   *v1.TrainJobSpec
		worker int
		want   string
	}{{&four.Spec, 0, "0-3"}, {&four.Spec, 2, "8-11"}, {&one.Spec, 3, "3"}, {&one.Spec, -1, "?"}} {
		if got := rankRange(tc.spec, tc.worker); got != tc.want {
			t.Errorf("rankRange(worker %d of %d procs): %q, want %q", tc.worker, procsPerWorker(tc.spec), got, tc.want)
		}
	}
}

// -i names worker-I or one of the job's pods; anything else is refused with the workers
// and pods there are.
func TestFindInstance(t *testing.T) {
	job := running() // 2 workers, attempt 2
	pods := []corev1.Pod{workerPod(&job, 0, "gpu-1", corev1.ContainerState{}), workerPod(&job, 1, "gpu-2", corev1.ContainerState{})}
	old := workerPod(&job, 0, "gpu-7", corev1.ContainerState{})
	old.Name, old.Labels[workload.LabelAttempt] = "bert-large-a1-0-zzzzz", "1"
	pods = append(pods, old)
	for in, want := range map[string]int{"worker-0": 0, "worker-1": 1, "worker-12": 12} {
		if w, ok := workerName(in); !ok || w != want {
			t.Errorf("workerName(%q) = %d, %v; want %d", in, w, ok, want)
		}
	}
	for _, in := range []string{"worker-", "worker-x", "worker--1", "worker-1a", "bert-large-a2-0-abcde"} {
		if w, ok := workerName(in); ok {
			t.Errorf("workerName(%q) = %d; want no worker", in, w)
		}
	}
	if p, err := findPod(&job, "bert-large-a2-1-abcde", pods, 0); err != nil || p.Name != "bert-large-a2-1-abcde" || workerIndex(p) != 1 {
		t.Errorf("findPod of worker 1's pod: %v, %v", p, err)
	}
	if p, err := findPod(&job, "bert-large-a1-0-zzzzz", pods, 0); err != nil || podAttempt(p) != 1 {
		t.Errorf("findPod of attempt 1's pod: %v, %v", p, err)
	}
	errs := map[string]struct {
		name    string
		attempt int32
		want    string
	}{
		"no such worker": {name: "worker-9", want: "-i worker-9: TrainJob bert-large has 2 workers, worker-0 and worker-1, whose pods in attempt 2 are " +
			"bert-large-a2-0-abcde, bert-large-a2-1-abcde; name one of them, or give --all-ranks for every worker"},
		"no such pod": {name: "bert-large-a2-7-abcde", want: "-i bert-large-a2-7-abcde: TrainJob bert-large has 2 workers"},
		"another attempt's pod": {name: "bert-large-a1-0-zzzzz", attempt: 2,
			want: "-i bert-large-a1-0-zzzzz: that pod is of attempt 1, not of --attempt 2"},
	}
	for name, tc := range errs {
		t.Run(name, func(t *testing.T) {
			_, err := findPod(&job, tc.name, pods, tc.attempt)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v; want an InputError starting %q", err, tc.want)
			}
		})
	}
	one := makeJob("solo").obj()
	if err := unknownInstance(&one, "worker-1", nil); err.Error() != "-i worker-1: TrainJob solo has 1 worker, worker-0 and no pods yet; "+
		"name one of them, or give --all-ranks for every worker" {
		t.Errorf("one worker, not started: %v", err)
	}
}

// The pod log API's options: --since as whole seconds (rounded up) or --since-time, and
// --tail only when every line of the pod is printed (a rank's are filtered after).
func TestPodLogOptions(t *testing.T) {
	at := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		opts LogOptions
		want corev1.PodLogOptions
	}{
		"none":       {opts: LogOptions{Rank: -1}},
		"since":      {opts: LogOptions{Rank: -1, Since: 10 * time.Minute, Tail: 5}, want: corev1.PodLogOptions{SinceSeconds: ptr(int64(600)), TailLines: ptr(int64(5))}},
		"since 1.5s": {opts: LogOptions{Rank: -1, Since: 1500 * time.Millisecond}, want: corev1.PodLogOptions{SinceSeconds: ptr(int64(2))}},
		"since-time": {opts: LogOptions{Rank: -1, SinceTime: at}, want: corev1.PodLogOptions{SinceTime: &metav1.Time{Time: at}}},
		"a rank":     {opts: LogOptions{Rank: 1, Tail: 5}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &logReader{opts: tc.opts}
			if diff := cmp.Diff(tc.want, l.logOptions()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// --timestamps prints the kubelet's time of each line as it wrote it; lines from the run
// folder have none.
func TestWriteTimestamps(t *testing.T) {
	var out bytes.Buffer
	l := &logReader{opts: LogOptions{Timestamps: true}, out: &out}
	for _, line := range []logLine{parseLogLine("2026-11-22T13:00:01.5Z [rank 0 pid 1] a\n"), {text: "[rank 0] from the file"}} {
		if err := l.write(line); err != nil {
			t.Fatal(err)
		}
	}
	if want := "2026-11-22T13:00:01.5Z [rank 0 pid 1] a\n[rank 0] from the file\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// From the run folder, -i worker-I reads the logs of that worker's ranks only.
func TestRankFilesOfWorker(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"rank-0.log", "rank-1.log", "rank-2.log", "rank-3.log", "rank-10.log", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	job := makeJob("bert").workers(3).gpus(2).obj() // ranks 0-1, 2-3, 4-5
	for worker, want := range map[int][]int{-1: {0, 1, 2, 3, 10}, 0: {0, 1}, 1: {2, 3}} {
		l := &logReader{job: &job, worker: worker, opts: LogOptions{Rank: -1}}
		got, err := l.rankFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("worker %d (-want +got):\n%s", worker, diff)
		}
	}
}
