package kubecli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/workload"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with what the printers write")

// now is the time the tables are printed at.
var now = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// golden compares got with testdata/<name>.golden, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// testView returns a view at now in UTC, and what it writes.
func testView(wide bool) (View, *bytes.Buffer) {
	var out bytes.Buffer
	return View{Out: &out, Now: now, Wide: wide, Loc: time.UTC}, &out
}

// jobBuilder builds TrainJobs for tests: makeJob("mnist").workers(2).gpus(1).obj().
type jobBuilder struct{ j v1.TrainJob }

func makeJob(name string) *jobBuilder {
	b := &jobBuilder{}
	b.j.Name, b.j.Namespace, b.j.UID = name, "team-a", types.UID("uid-"+name)
	b.j.CreationTimestamp = ago(3 * time.Hour)
	b.j.Spec.Command = []string{"python3", "train.py", "--lr", "0.01"}
	b.j.Spec.Kubernetes = &v1.KubernetesSpec{Image: "pytorch/pytorch:2.9.0"}
	return b
}

func (b *jobBuilder) workers(n int32) *jobBuilder { b.j.Spec.Workers = &n; return b }
func (b *jobBuilder) gpus(n int32) *jobBuilder    { b.j.Spec.Resources.GPU = n; return b }
func (b *jobBuilder) status(st v1.TrainJobStatus) *jobBuilder {
	b.j.Status = st
	return b
}
func (b *jobBuilder) obj() v1.TrainJob { return *b.j.DeepCopy() }

// running is a job in its second attempt after an eviction, with metrics.
func running() v1.TrainJob {
	start := ago(150 * time.Minute)
	return makeJob("bert-large").workers(2).gpus(4).status(v1.TrainJobStatus{Phase: v1.PhaseRunning, Attempt: 2, Restarts: 1,
		Disruptions: 1, WorkerReplacements: []int32{0, 2}, WorkersReady: 1, Reason: "attempt 2: 1 of 2 workers running; worker 1 waits for its image",
		StartTime: &start, Iteration: 1200, LastMetrics: map[string]string{"loss": "1.873", "lr": "0.0001", "tokens_per_s": "81234"},
		LatestCheckpoint: "checkpoint_001200", RunDir: "/trainyard/results/bert-large-6f1c2a90",
		Conditions: []metav1.Condition{
			{Type: v1.CondCreated, Status: metav1.ConditionTrue, Reason: "AttemptCreated", Message: "attempt 2 created", LastTransitionTime: ago(20 * time.Minute)},
			{Type: v1.CondRunning, Status: metav1.ConditionFalse, Reason: "WorkersStarting", Message: "1 of 2 workers running", LastTransitionTime: ago(20 * time.Minute)},
			{Type: v1.CondRestarting, Status: metav1.ConditionFalse, Reason: "Evicted",
				Message:            "worker 1's pod was evicted from node gpu-3 (node pressure: memory); the restart does not count against maxRestarts",
				LastTransitionTime: ago(21 * time.Minute)},
		}}).obj()
}

// workerPod is a pod of one worker of job's current attempt.
func workerPod(job *v1.TrainJob, worker int, node string, state corev1.ContainerState) corev1.Pod {
	attempt := int(job.Status.Attempt)
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: workload.AttemptName(job.Name, attempt) + "-" + string(rune('0'+worker)) + "-abcde",
		CreationTimestamp: ago(20 * time.Minute),
		Labels:            map[string]string{workload.LabelJob: job.Name, workload.LabelAttempt: "2", workload.LabelWorkerIndex: string(rune('0' + worker))}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: workload.WorkerContainer,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: resource.MustParse("4")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: workload.WorkerContainer, State: state}}},
	}
	if node != "" {
		p.Status.PodIP = "10.4.0." + string(rune('5'+worker))
	}
	if state.Waiting != nil {
		p.Status.Phase = corev1.PodPending
	}
	return p
}

func TestPrintJobs(t *testing.T) {
	pending := makeJob("resnet").obj()
	pending.CreationTimestamp = ago(40 * time.Second)
	suspending := makeJob("gpt-small").workers(4).gpus(8).status(v1.TrainJobStatus{Phase: v1.PhaseRunning, Attempt: 1, WorkersReady: 4}).obj()
	suspending.Spec.Suspend = true
	suspending.Namespace = "team-b"
	jobs := []v1.TrainJob{running(), pending, suspending}
	cases := map[string]struct {
		jobs []v1.TrainJob
		all  bool
		wide bool
	}{
		"list":           {jobs: jobs},
		"list-all-wide":  {jobs: jobs, all: true, wide: true},
		"list-none-here": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, out := testView(tc.wide)
			nodes := WorkerNodes{"team-a/bert-large": "gpu-1"} // the others have no worker 0 on a node: N/A
			if err := PrintJobs(v, tc.jobs, nodes, tc.all, "in namespace team-a"); err != nil {
				t.Fatal(err)
			}
			golden(t, name, out.String())
		})
	}
}

func TestPrintDetail(t *testing.T) {
	job := running()
	d := &Detail{Job: &job,
		Pods: []corev1.Pod{
			workerPod(&job, 0, "gpu-1", corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}),
			workerPod(&job, 1, "gpu-2", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: `Back-off pulling image "pytorch/pytorch:2.9.0": rpc error: code = NotFound desc = failed to pull and unpack image`}}),
		},
		Events: []corev1.Event{
			{Type: corev1.EventTypeWarning, Reason: "Evicted", Message: "worker 1 evicted; starting attempt 2", Count: 1,
				Source: corev1.EventSource{Component: "trainyard-operator"}, LastTimestamp: ago(21 * time.Minute)},
			{Type: corev1.EventTypeNormal, Reason: "Created", Message: "created attempt 2 (bert-large-a2)",
				ReportingController: "trainyard.dev/operator", EventTime: metav1.NewMicroTime(now.Add(-20 * time.Minute)),
				Series: &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(-10 * time.Minute))}},
		},
	}
	v, out := testView(false)
	if err := PrintDetail(v, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "get-running", out.String())

	// -e: the pods' events too, each with its object; the pods' priority class; how to
	// reach the job's TensorBoard; the commit of its code the workers checked out.
	job.Spec.Kubernetes.TensorBoard = &v1.TensorBoardSpec{}
	job.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/ml/bert.git", Branch: "main"}}
	job.Status.SourceCommit = "0123456789abcdef0123456789abcdef01234567"
	for i := range d.Pods {
		d.Pods[i].Spec.PriorityClassName = "team-a-high"
	}
	d.PodEvents = true
	d.Events = append(d.Events[:1], corev1.Event{Type: corev1.EventTypeWarning, Reason: "Failed", Count: 4,
		Message:        `Failed to pull image "pytorch/pytorch:2.9.0": not found`,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: d.Pods[1].Name}, Source: corev1.EventSource{Component: "kubelet"},
		FirstTimestamp: ago(19 * time.Minute), LastTimestamp: ago(15 * time.Minute)}, d.Events[1])
	d.Events[0].InvolvedObject = corev1.ObjectReference{Kind: v1.Kind, Name: job.Name}
	d.Events[2].InvolvedObject = corev1.ObjectReference{Kind: v1.Kind, Name: job.Name}
	v, out = testView(false)
	if err := PrintDetail(v, d); err != nil {
		t.Fatal(err)
	}
	golden(t, "get-events", out.String())

	fresh := makeJob("resnet").obj()
	fresh.Spec.Suspend = true
	v, out = testView(false)
	if err := PrintDetail(v, &Detail{Job: &fresh, Problems: []string{"cannot list the events: forbidden"}}); err != nil {
		t.Fatal(err)
	}
	golden(t, "get-unseen", out.String())
}

func TestPrintTop(t *testing.T) {
	nodes := []NodeUsage{
		{Name: "gpu-1", Ready: true, Schedulable: true, GPUModel: "NVIDIA-H100-80GB-HBM3", GPUs: Usage{8, 4},
			MilliCPU: Usage{190000, 16500}, MemoryBytes: Usage{2000 << 30, 130 << 30}, Pods: 3},
		{Name: "gpu-2", Ready: false, Schedulable: false, GPUs: Usage{8, 0}, MilliCPU: Usage{190000, 0}, MemoryBytes: Usage{2000 << 30, 0}},
		{Name: "system-1", Ready: true, Schedulable: true, MilliCPU: Usage{4000, 3800}, MemoryBytes: Usage{16 << 30, 15<<30 + 512<<20}, Pods: 12},
	}
	v, out := testView(true)
	if err := PrintNodeUsage(v, nodes); err != nil {
		t.Fatal(err)
	}
	golden(t, "top-node", out.String())

	job := running()
	usage := []JobUsage{{Namespace: "team-a", Name: job.Name, Phase: v1.PhaseRunning, Workers: 2, Ready: 1, GPUsRequested: 8, GPUsHeld: 8,
		Node: "gpu-1", Iteration: 1200, Metrics: job.Status.LastMetrics, Created: job.CreationTimestamp},
		{Namespace: "team-b", Name: "resnet", Workers: 1, GPUsRequested: 1, Created: ago(time.Minute)},
		{Namespace: "team-b", Name: "vit", Phase: v1.PhaseSucceeded, Workers: 4, GPUsRequested: 16, Node: "gpu-2", Iteration: 90000,
			Created: ago(30 * time.Hour)}}
	v, out = testView(false)
	if err := PrintJobUsage(v, usage, true, "in any namespace"); err != nil {
		t.Fatal(err)
	}
	golden(t, "top-job", out.String())

	jw := &JobWorkers{Job: usage[0], Attempt: 2, Workers: []WorkerUsage{
		{Worker: 0, Pod: "bert-large-a2-0-abcde", Node: "gpu-1", Phase: "Running", State: "Running", GPUs: 4, MilliCPU: 16000, MemoryBytes: 128 << 30,
			GPUUse: &client.GPUUse{Percent: 87.5, UsedBytes: 4 * 61440 << 20, TotalBytes: 4 * 81559 << 20}},
		{Worker: 1, Pod: "bert-large-a2-1-fghij", Phase: "Pending", State: "Unschedulable", GPUs: 4, MilliCPU: 16000, MemoryBytes: 128 << 30},
	}}
	v, out = testView(false)
	if err := PrintJobWorkers(v, jw); err != nil {
		t.Fatal(err)
	}
	golden(t, "top-job-workers", out.String())
}

// A worker's GPUs sum up to one row: mean utilisation, memory summed; an error or no GPU
// reported is no figure, not a zero.
func TestUseOf(t *testing.T) {
	u, ok := UseOf(workload.WorkerGPUs{GPUs: []workload.GPUSample{
		{Index: 0, UtilizationPercent: 100, MemoryUsedBytes: 10 << 30, MemoryTotalBytes: 80 << 30},
		{Index: 1, UtilizationPercent: 50, MemoryUsedBytes: 20 << 30, MemoryTotalBytes: 80 << 30}}})
	if !ok || u.Percent != 75 || u.UsedBytes != 30<<30 || u.TotalBytes != 160<<30 {
		t.Errorf("useOf = %+v, %v", u, ok)
	}
	for _, g := range []workload.WorkerGPUs{{}, {Error: "nvidia-smi: not found", GPUs: []workload.GPUSample{{}}}} {
		if u, ok := UseOf(g); ok {
			t.Errorf("UseOf(%+v) = %+v, want none", g, u)
		}
	}
}

// describe's note on an elastic gang below its most says why: Kueue's admission, a resize,
// a resize in place that dropped workers.
func TestPartly(t *testing.T) {
	four, two := int32(4), int32(2)
	job := func(st v1.TrainJobStatus, queue string) *v1.TrainJob {
		j := &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &four, MinWorkers: &two}, Status: st}
		if queue != "" {
			j.Spec.Kubernetes = &v1.KubernetesSpec{QueueName: queue}
		}
		return j
	}
	for _, tc := range []struct {
		job  *v1.TrainJob
		want string
	}{
		{job(v1.TrainJobStatus{}, ""), ""},
		{job(v1.TrainJobStatus{Workers: 3}, "team-a"), " (elastic: running with 3, as Kueue admitted)"},
		{job(v1.TrainJobStatus{Workers: 2}, ""), " (elastic: running with 2: resized, see the events)"},
		{job(v1.TrainJobStatus{Workers: 2, DroppedWorkers: []int32{2, 3}}, ""), " (elastic: running with 2 in place, without worker(s) 2, 3: resized, see the events)"},
	} {
		if got := partly(tc.job); got != tc.want {
			t.Errorf("partly(%+v) = %q; want %q", tc.job.Status, got, tc.want)
		}
	}
}
