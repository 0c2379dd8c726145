package envtest_test

// The command line with --kube against a real kube-apiserver and etcd. The control plane
// has no scheduler, kubelet or controllers, so the tests play their parts: they set the
// TrainJobs' status as the operator would, create the worker pods (labelled as the
// operator labels them) on nodes they create, set the pods' status as a
// kubelet would, and serve the pods' logs from a stand-in kubelet that the API server
// proxies `pods/log` to.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/cli"
	"github.com/trainyard/trainyard/internal/testkube"
	"github.com/trainyard/trainyard/internal/workload"
)

// cliCluster is a control plane with one namespace for a test's TrainJobs.
type cliCluster struct {
	t   *testing.T
	env *testkube.Env
	ns  string
	ctx context.Context
}

func newCLICluster(t *testing.T) *cliCluster {
	t.Helper()
	env := testkube.Start(t, testkube.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cli-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// No controller-manager makes the namespace's default service account, which pods
	// are given.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	return &cliCluster{t: t, env: env, ns: ns.Name, ctx: ctx}
}

// trainyard runs the command line with args, the command's words first; --kube,
// --kubeconfig and -n (the test's namespace) are added after them. It returns the exit
// code, stdout and stderr.
func (k *cliCluster) trainyard(words []string, args ...string) (int, string, string) {
	k.t.Helper()
	full := append(append(append([]string{}, words...), "--kube", "--kubeconfig", k.env.Kubeconfig, "-n", k.ns), args...)
	var out, errOut bytes.Buffer
	code := cli.Main(k.ctx, full, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	k.t.Logf("trainyard %s: exit %d\n%s%s", strings.Join(full, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

func (k *cliCluster) create(obj client.Object) {
	k.t.Helper()
	if err := k.env.Client.Create(k.ctx, obj); err != nil {
		k.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (k *cliCluster) job(name string) *v1alpha1.TrainJob {
	k.t.Helper()
	job := &v1alpha1.TrainJob{}
	if err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: name}, job); err != nil {
		k.t.Fatalf("get TrainJob %s: %v", name, err)
	}
	return job
}

// setJobStatus sets a TrainJob's status as the operator would.
func (k *cliCluster) setJobStatus(name string, set func(*v1alpha1.TrainJobStatus)) *v1alpha1.TrainJob {
	k.t.Helper()
	job := k.job(name)
	set(&job.Status)
	if err := k.env.Client.Status().Update(k.ctx, job); err != nil {
		k.t.Fatalf("update the status of %s: %v", name, err)
	}
	return job
}

// node creates a node with GPUs, CPU and memory, whose kubelet listens on 127.0.0.1:port
// (0: none).
func (k *cliCluster) node(name string, gpus int64, cpu, memory string, port int) {
	k.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
	k.create(n)
	n.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
			"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
	}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if err := k.env.Client.Status().Update(k.ctx, n); err != nil {
		k.t.Fatalf("update the status of node %s: %v", name, err)
	}
	k.t.Cleanup(func() { _ = k.env.Client.Delete(context.Background(), n) })
}

// workerPod creates the pod of one worker of an attempt on a node, as the Job controller
// and the scheduler would, and sets its status as the kubelet would.
func (k *cliCluster) workerPod(job *v1alpha1.TrainJob, attempt, worker int, node string, gpus int64, state corev1.ContainerState) *corev1.Pod {
	k.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: fmt.Sprintf("%s-%d-x%d", workload.AttemptName(job.Name, attempt), worker, attempt),
			Labels: map[string]string{workload.LabelJob: job.Name, workload.LabelJobUID: string(job.UID),
				workload.LabelAttempt: strconv.Itoa(attempt), workload.LabelManagedBy: workload.ManagedBy,
				workload.LabelWorkerIndex: strconv.Itoa(worker)}},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: workload.WorkerContainer, Image: "img:1", Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}}}},
	}
	k.create(p)
	phase := corev1.PodRunning
	switch {
	case state.Waiting != nil:
		phase = corev1.PodPending
	case state.Terminated != nil && state.Terminated.ExitCode == 0:
		phase = corev1.PodSucceeded
	case state.Terminated != nil:
		phase = corev1.PodFailed
	}
	p.Status = corev1.PodStatus{Phase: phase, PodIP: fmt.Sprintf("10.0.%d.%d", attempt, worker+10),
		ContainerStatuses: []corev1.ContainerStatus{{Name: workload.WorkerContainer, State: state, Image: "img:1", RestartCount: int32(worker)}}}
	if err := k.env.Client.Status().Update(k.ctx, p); err != nil {
		k.t.Fatalf("update the status of pod %s: %v", p.Name, err)
	}
	return p
}

var (
	stateRunning = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	statePulling = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "img:1"`}}
	stateDone    = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
)

// fakeLogLine is one line a container printed, and when.
type fakeLogLine struct {
	at   time.Time
	text string
}

// startFakeKubelet serves GET /containerLogs/{namespace}/{pod}/{container} as the kubelet
// does, from logs (by pod name): with timestamps when asked, the last tailLines when
// asked, those since sinceTime or of the last sinceSeconds when asked; a followed log
// ends with the lines, as the log of a container that has exited does. It returns its
// port, and a function that returns the queries it was sent.
func startFakeKubelet(t *testing.T, logs map[string][]fakeLogLine) (int, func() []url.Values) {
	t.Helper()
	var (
		mu      sync.Mutex
		queries []url.Values
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		queries = append(queries, q)
		mu.Unlock()
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
		lines, ok := logs[parts[1]]
		if len(parts) != 3 || !ok || parts[2] != workload.WorkerContainer {
			http.Error(w, "no such container", http.StatusNotFound)
			return
		}
		if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		since, _ := time.Parse(time.RFC3339, q.Get("sinceTime"))
		if n, err := strconv.Atoi(q.Get("sinceSeconds")); err == nil {
			since = time.Now().Add(-time.Duration(n) * time.Second)
		}
		for _, l := range lines {
			if l.at.Before(since) {
				continue
			}
			if q.Get("timestamps") == "true" {
				fmt.Fprintf(w, "%s ", l.at.UTC().Format(time.RFC3339Nano))
			}
			fmt.Fprintln(w, l.text)
		}
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return port, func() []url.Values {
		mu.Lock()
		defer mu.Unlock()
		return append([]url.Values(nil), queries...)
	}
}

// wantOutput fails the test unless the command exited with wantCode and out (its stdout
// or its stderr) holds every one of the texts.
func wantOutput(t *testing.T, what string, code int, out string, wantCode int, texts ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit %d, want %d", what, code, wantCode)
	}
	for _, s := range texts {
		if !strings.Contains(out, s) {
			t.Errorf("%s: output lacks %q:\n%s", what, s, out)
		}
	}
}

// wantMatch fails the test unless out matches every one of the regular expressions.
func wantMatch(t *testing.T, what, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("%s: output does not match %q:\n%s", what, re, out)
		}
	}
}

func TestCLISubmit(t *testing.T) {
	k := newCLICluster(t)
	submit := []string{"submit"}

	code, out, errOut := k.trainyard(submit, "--name", "mnist", "--image", "img:1", "--workers", "2", "--gpus-per-worker", "1",
		"--queue", "team-a", "--node-selector", "pool=h100", "--", "python3", "train.py", "--epochs", "3")
	wantOutput(t, "submit", code, out, 0, "mnist\n")
	wantOutput(t, "submit's hint", code, errOut, 0, "trainyard: created TrainJob mnist in namespace "+k.ns,
		"'trainyard get --kube -n "+k.ns+" mnist'", "no volume is mounted at the storage path /trainyard/results")
	job := k.job("mnist")
	if s := job.Spec; s.WorkerCount() != 2 || s.Resources.GPU != 1 || s.Kubernetes.Image != "img:1" || s.Kubernetes.QueueName != "team-a" ||
		s.Kubernetes.NodeSelector["pool"] != "h100" || strings.Join(s.Command, " ") != "python3 train.py --epochs 3" ||
		s.StoragePath != "" || s.WorkingDir != "" {
		t.Errorf("created spec %+v %+v", s, s.Kubernetes)
	}

	code, out, _ = k.trainyard(submit, "--image", "img:1", "--", "python3", "/app/train.py")
	if code != 0 || !regexp.MustCompile(`^train-[a-z0-9]{5}\n$`).MatchString(out) {
		t.Errorf("submit without --name: exit %d, %q; want a name generated from train.py", code, out)
	}

	file := filepath.Join(t.TempDir(), "job.yaml")
	writeTestFile(t, file, `apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: from-file}
spec:
  command: [python3, train.py]
  workingDir: examples/fashion-mnist
  storagePath: /mnt/results
  kubernetes:
    image: img:2
    volumes: [{name: results, persistentVolumeClaim: {claimName: results}}]
    volumeMounts: [{name: results, mountPath: /mnt}]
`)
	code, out, errOut = k.trainyard(submit, "-f", file)
	wantOutput(t, "submit -f", code, out, 0, "from-file\n")
	if strings.Contains(errOut, "warning") {
		t.Errorf("submit -f of a job with its storage on a volume warns: %s", errOut)
	}
	if s := k.job("from-file").Spec; s.WorkingDir != "examples/fashion-mnist" || s.StoragePath != "/mnt/results" {
		t.Errorf("from the file: workingDir %q, storagePath %q; want them as written", s.WorkingDir, s.StoragePath)
	}

	code, out, _ = k.trainyard(submit, "--dry-run", "--name", "dry", "--image", "img:1", "--", "python3", "train.py")
	wantOutput(t, "submit --dry-run", code, out, 0, "kind: TrainJob", "name: dry", "image: img:1", "workers: 1")
	var dry v1alpha1.TrainJob
	if err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: "dry"}, &dry); !apierrors.IsNotFound(err) {
		t.Errorf("submit --dry-run created the job: %v", err)
	}

	cases := map[string]struct {
		args []string
		code int
		want string // stderr starts with it
	}{
		"no image": {args: []string{"--name", "noimage", "--", "python3", "train.py"}, code: 2,
			want: "trainyard: no image: on Kubernetes every worker runs in a container, so the job needs its image: give --image IMAGE"},
		"invalid here": {args: []string{"--image", "img:1", "--workers", "0", "--", "true"}, code: 2,
			want: "trainyard: invalid job: --workers (spec.workers): Invalid value: 0"},
		"refused by the API server": {args: []string{"--name", "badpolicy", "--image", "img:1", "--image-pull-policy", "Sometimes", "--", "true"}, code: 2,
			want: `trainyard: the cluster refused the job: spec.kubernetes.imagePullPolicy: Unsupported value: "Sometimes"`},
		"a name the CRD would refuse": {args: []string{"--name", "my.job", "--image", "img:1", "--", "true"}, code: 2,
			want: `trainyard: invalid job: --name (metadata.name): Invalid value: "my.job": a name is 1 to 45 characters`},
		"taken name": {args: []string{"--name", "mnist", "--image", "img:1", "--", "true"}, code: 1,
			want: `trainyard: TrainJob "mnist" already exists in namespace "` + k.ns + `"`},
		"server flag": {args: []string{"--id", "x1", "--image", "img:1", "--", "true"}, code: 2,
			want: "trainyard: --id: only for a trainyard server, not with --kube"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := k.trainyard(submit, tc.args...)
			if code != tc.code || !strings.HasPrefix(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
	var list v1alpha1.TrainJobList
	if err := k.env.Client.List(k.ctx, &list, client.InNamespace(k.ns)); err != nil || len(list.Items) != 3 {
		t.Errorf("%d TrainJobs (%v); want the 3 submitted, none of those refused", len(list.Items), err)
	}

	var out2, errOut2 bytes.Buffer
	code = cli.Main(k.ctx, []string{"submit", "--image", "img:1", "--", "true"}, cli.IO{In: strings.NewReader(""), Out: &out2, Err: &errOut2})
	if code != 2 || !strings.HasPrefix(errOut2.String(), "trainyard: --image: only with --kube") {
		t.Errorf("--image without --kube: exit %d, %q", code, errOut2.String())
	}
}

// submitRunningMNIST is the TrainJob mnist in its second attempt, as the operator reports it.
func submitRunningMNIST(k *cliCluster, runDir string) *v1alpha1.TrainJob {
	if code, _, _ := k.trainyard([]string{"submit"}, "--name", "mnist", "--image", "img:1", "--workers", "2", "--gpus-per-worker", "1",
		"--", "python3", "train.py"); code != 0 {
		k.t.Fatal("submit mnist failed")
	}
	now := metav1.Now()
	return k.setJobStatus("mnist", func(st *v1alpha1.TrainJobStatus) {
		*st = v1alpha1.TrainJobStatus{Phase: v1alpha1.PhaseRunning, Attempt: 2, Restarts: 1, Disruptions: 1, WorkersReady: 1,
			Reason: "attempt 2: 1 of 2 workers running", StartTime: &now, AttemptStartTime: &now, Iteration: 7,
			LastMetrics: map[string]string{"loss": "0.4123", "accuracy": "0.86"}, LatestCheckpoint: "checkpoint_000007", RunDir: runDir}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.CondCreated, Status: metav1.ConditionTrue, Reason: "AttemptCreated", Message: "attempt 2 created"})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.CondRestarting, Status: metav1.ConditionFalse, Reason: "Evicted", Message: "worker 1 was evicted"})
	})
}

func TestCLIListGetStopDelete(t *testing.T) {
	k := newCLICluster(t)
	list := []string{"list"}

	code, out, _ := k.trainyard(list)
	wantOutput(t, "list of no jobs", code, out, 0, "No TrainJobs in namespace "+k.ns+".\n")

	job := submitRunningMNIST(k, "/trainyard/results/mnist-1234")
	k.node("gpu-a", 8, "64", "512Gi", 0)
	k.node("gpu-b", 8, "64", "512Gi", 0)
	first := k.workerPod(job, 1, 0, "gpu-b", 1, stateDone) // the first attempt's, not shown
	k.workerPod(job, 2, 0, "gpu-a", 1, stateRunning)
	pending := k.workerPod(job, 2, 1, "", 1, statePulling)
	k.create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "mnist.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", APIVersion: v1alpha1.APIVersion, Namespace: k.ns, Name: "mnist", UID: job.UID},
		Reason:         "Restarting", Message: "worker 1 was evicted; starting attempt 2", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "trainyard-operator"}, Count: 2,
		FirstTimestamp: metav1.NewTime(time.Now().Add(-5 * time.Minute)), LastTimestamp: metav1.NewTime(time.Now().Add(-3 * time.Minute))})
	k.create(&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "mnist.2"},
		Regarding: corev1.ObjectReference{Kind: "TrainJob", APIVersion: v1alpha1.APIVersion, Namespace: k.ns, Name: "mnist", UID: job.UID},
		Reason:    "Created", Note: "created attempt 2 (mnist-a2)", Type: corev1.EventTypeNormal, Action: "Create",
		ReportingController: "trainyard.dev/operator", ReportingInstance: "operator-0", EventTime: metav1.NewMicroTime(time.Now())})

	// Pod events, for get -e: the current attempt's pods', not the first attempt's.
	for i, e := range []struct {
		pod            *corev1.Pod
		reason, source string
		message        string
	}{
		{pending, "FailedScheduling", "default-scheduler", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."},
		{first, "Pulled", "kubelet", `Successfully pulled image "img:1"`},
	} {
		k.create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: fmt.Sprintf("%s.%d", e.pod.Name, i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: k.ns, Name: e.pod.Name, UID: e.pod.UID},
			Reason:         e.reason, Message: e.message, Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: e.source},
			Count: 1, FirstTimestamp: metav1.NewTime(time.Now().Add(-time.Minute)), LastTimestamp: metav1.NewTime(time.Now().Add(-time.Minute))})
	}

	code, out, _ = k.trainyard(list)
	wantOutput(t, "list", code, out, 0, "NAME   PHASE    READY  GPUS  RESTARTS          AGE  NODE   REASON\n")
	wantMatch(t, "list", out, `mnist  Running  1/2    2     1 \(1 disruption\)  \d+s +gpu-a  attempt 2: 1 of 2 workers running`)
	code, out, _ = k.trainyard(list, "-A", "-o", "wide")
	wantOutput(t, "list -A -o wide", code, out, 0, "NAMESPACE", "ATTEMPT  ITERATION", k.ns+"  mnist")
	code, out, _ = k.trainyard(list, "--status", "succeeded")
	wantOutput(t, "list --status succeeded", code, out, 0, "No TrainJobs")
	code, out, _ = k.trainyard(list, "-o", "json")
	var jobs v1alpha1.TrainJobList
	if err := json.Unmarshal([]byte(out), &jobs); code != 0 || err != nil || jobs.Kind != "TrainJobList" || len(jobs.Items) != 1 ||
		jobs.Items[0].Status.Iteration != 7 || strings.Contains(out, "managedFields") {
		t.Errorf("list -o json: exit %d, %v: %s", code, err, out)
	}

	code, out, _ = k.trainyard([]string{"get", "mnist"})
	wantOutput(t, "get", code, out, 0,
		"Name:        mnist\n", "Phase:       Running\n", "Reason:      attempt 2: 1 of 2 workers running\n", "Attempt:     2\n",
		"Restarts:    1 (1 disruption)\n", "Workers:     2 x 1 process, 1 GPU each\n", "Ready:       1/2\n", "Image:       img:1\n",
		"Priority:    N/A\n", "Run dir:     /trainyard/results/mnist-1234\n", "Iteration:   7\n", "Checkpoint:  checkpoint_000007\n",
		"Last metrics (iteration 7):", "  accuracy  0.86\n  loss      0.4123\n",
		"Conditions:", "  Restarting  False   Evicted",
		"Workers of attempt 2 (mnist-a2):\n  WORKER  RANKS  POD            PHASE    STATE             RESTARTS  REPLACED  GPUS  NODE   IP         AGE  MESSAGE\n",
		"\nGPUs:\n  Allocated/Requested GPUs of Job: 1/2\n",
		"Events:\n  TYPE     REASON      AGE", "  Normal   Created", "trainyard.dev/operator  created attempt 2 (mnist-a2)\n")
	wantMatch(t, "get", out, `Duration:    \d+s\n`,
		`  Warning  Restarting  3m\d*s? \(x2 over 5m\d*s?\) +trainyard-operator +worker 1 was evicted; starting attempt 2\n`,
		`  0       0      mnist-a2-0-x2  Running  Running           0         0         1     gpu-a  10\.0\.2\.10  \d+s +-\n`,
		`  1       1      mnist-a2-1-x2  Pending  ImagePullBackOff  1         0         1     -      10\.0\.2\.11  \d+s +Back-off pulling image "img:1"\n`)
	if strings.Contains(out, "mnist-a1-0") || strings.Contains(out, "FailedScheduling") {
		t.Errorf("get shows the first attempt's pod, or without -e a pod's event:\n%s", out)
	}

	// -e: the pods' events too, each with its object; the priority class the job asks for
	// when its pods do not say.
	job = k.job("mnist")
	job.Spec.Kubernetes.PriorityClassName = "team-high"
	if err := k.env.Client.Update(k.ctx, job); err != nil {
		t.Fatal(err)
	}
	code, out, _ = k.trainyard([]string{"get", "mnist"}, "-e")
	wantOutput(t, "get -e", code, out, 0, "Priority:    team-high\n", "Events:\n  OBJECT             TYPE     REASON            AGE")
	wantMatch(t, "get -e", out,
		`  trainjob/mnist +Warning  Restarting +3m\d*s? \(x2 over 5m\d*s?\) +trainyard-operator +worker 1 was evicted; starting attempt 2\n`,
		`  pod/mnist-a2-1-x2 +Warning  FailedScheduling +\d+s +default-scheduler +0/2 nodes are available: 2 Insufficient nvidia.com/gpu.\n`,
		`  trainjob/mnist +Normal   Created `)
	if strings.Contains(out, "Pulled") {
		t.Errorf("get -e shows the event of the first attempt's pod:\n%s", out)
	}
	code, out, _ = k.trainyard([]string{"get", "mnist"}, "-o", "yaml")
	wantOutput(t, "get -o yaml", code, out, 0, "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\n", "latestCheckpoint: checkpoint_000007")

	code, out, _ = k.trainyard([]string{"stop", "mnist"})
	wantOutput(t, "stop", code, out, 0, "TrainJob mnist suspended: the operator stops its running attempt",
		`kubectl patch trainjob mnist -n `+k.ns+` --type=merge -p '{"spec":{"suspend":false}}'`)
	if !k.job("mnist").Spec.Suspend {
		t.Error("stop did not set spec.suspend")
	}
	code, out, _ = k.trainyard([]string{"stop", "mnist"})
	wantOutput(t, "stop again", code, out, 0, "TrainJob mnist was suspended already.")

	k.setJobStatus("mnist", func(st *v1alpha1.TrainJobStatus) { st.Phase = v1alpha1.PhaseSucceeded })
	bad := map[string]struct {
		words, args []string
		code        int
		want        string
	}{
		"get an unknown job":     {words: []string{"get", "nope"}, code: 1, want: `trainyard: TrainJob "nope" not found in namespace "` + k.ns + `"`},
		"logs of an unknown job": {words: []string{"logs", "nope"}, code: 1, want: `trainyard: TrainJob "nope" not found in namespace "` + k.ns + `"`},
		"stop an unknown job":    {words: []string{"stop", "nope"}, code: 1, want: `trainyard: TrainJob "nope" not found`},
		"stop an ended job":      {words: []string{"stop", "mnist"}, code: 1, want: "trainyard: TrainJob mnist has already succeeded: there is nothing to stop"},
		"delete an unknown job":  {words: []string{"delete", "nope"}, code: 1, want: `trainyard: TrainJob "nope" not found`},
		"top an unknown job":     {words: []string{"top", "job", "nope"}, code: 1, want: `trainyard: TrainJob "nope" not found`},
		"bad phase":              {words: []string{"list"}, args: []string{"--status", "lost"}, code: 2, want: `trainyard: --status "lost": use pending, running`},
		"bad namespace":          {words: []string{"list"}, args: []string{"-n", "Not_A_Namespace"}, code: 2, want: `trainyard: namespace "Not_A_Namespace"`},
		"server flag":            {words: []string{"list"}, args: []string{"--address", "http://x"}, code: 2, want: "trainyard: --address: only for a trainyard server, not with --kube"},
		"rank out of range":      {words: []string{"logs", "mnist"}, args: []string{"--rank", "2"}, code: 2, want: "trainyard: --rank 2: TrainJob mnist has ranks 0 to 1"},
		"attempt out of range":   {words: []string{"logs", "mnist"}, args: []string{"--attempt", "3"}, code: 2, want: "trainyard: --attempt 3: TrainJob mnist has had 2 attempts"},
		"no such worker": {words: []string{"logs", "mnist"}, args: []string{"-i", "worker-9"}, code: 2,
			want: "trainyard: -i worker-9: TrainJob mnist has 2 workers, worker-0 and worker-1, whose pods in attempt 2 are mnist-a2-0-x2, mnist-a2-1-x2; " +
				"name one of them, or give --all-ranks for every worker\n"},
		"no such pod": {words: []string{"logs", "mnist"}, args: []string{"-i", "mnist-a2-0"}, code: 2, want: "trainyard: -i mnist-a2-0: TrainJob mnist has 2 workers"},
		"another attempt's pod": {words: []string{"logs", "mnist"}, args: []string{"-i", "mnist-a1-0-x1", "--attempt", "2"}, code: 2,
			want: "trainyard: -i mnist-a1-0-x1: that pod is of attempt 1, not of --attempt 2\n"},
		"bad --since": {words: []string{"logs", "mnist"}, args: []string{"--since", "abc"}, code: 2,
			want: "trainyard: --since abc: not a duration: give a number and a unit, such as 30s, 10m or 2h\n"},
		"-i and --rank": {words: []string{"logs", "mnist"}, args: []string{"-i", "worker-1", "--rank", "1"}, code: 2, want: "trainyard: -i and --rank: give one of them"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := k.trainyard(tc.words, tc.args...)
			if code != tc.code || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line starting %q", code, errOut, tc.code, tc.want)
			}
		})
	}

	code, out, _ = k.trainyard([]string{"delete", "mnist"})
	wantOutput(t, "delete", code, out, 0, "TrainJob mnist deleted (its Jobs, Services and pods are deleted in the background)")
	if err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: "mnist"}, &v1alpha1.TrainJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete: %v", err)
	}
}

func TestCLITop(t *testing.T) {
	k := newCLICluster(t)
	job := submitRunningMNIST(k, "")
	k.node("gpu-a", 8, "64", "512Gi", 0)
	k.node("gpu-b", 4, "32", "256Gi", 0)
	k.workerPod(job, 2, 0, "gpu-a", 1, stateRunning)
	k.workerPod(job, 2, 1, "", 1, statePulling) // not scheduled: holds nothing
	k.workerPod(job, 1, 0, "gpu-b", 1, stateDone)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "inference"},
		Spec: corev1.PodSpec{NodeName: "gpu-b", Containers: []corev1.Container{{Name: "server", Image: "vllm", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("8500m"),
				corev1.ResourceMemory: resource.MustParse("64Gi")},
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}}}
	k.create(other)

	code, out, _ := k.trainyard([]string{"top", "node"}, "-o", "wide")
	wantOutput(t, "top node", code, out, 0,
		"NODE   STATUS  GPUS  GPUS REQUESTED  GPUS FREE  CPU  CPU REQUESTED  MEMORY  MEMORY REQUESTED  PODS  GPU MODEL\n",
		"gpu-a  Ready   8     1               7          64   4 (6%)         512Gi   16Gi (3%)         1     NVIDIA-H100-80GB-HBM3\n",
		"gpu-b  Ready   4     2               2          32   8.5 (26%)      256Gi   64Gi (25%)        1     NVIDIA-H100-80GB-HBM3\n",
		"GPUs: 3 requested of 12 allocatable on 2 nodes (9 free).\nAllocated/Total GPUs In Cluster: 3/12 (25%)\n")
	code, out, _ = k.trainyard([]string{"top", "node"}, "-o", "json")
	var nodes []struct {
		Name string
		GPUs struct{ Allocatable, Requested int64 }
	}
	if err := json.Unmarshal([]byte(out), &nodes); code != 0 || err != nil || len(nodes) != 2 || nodes[1].GPUs.Requested != 2 {
		t.Errorf("top node -o json: exit %d, %v: %s", code, err, out)
	}

	code, out, _ = k.trainyard([]string{"top", "job"})
	wantOutput(t, "top job", code, out, 0, "NAME   PHASE    READY  GPU(Requested)  GPU(Allocated)  NODE   ITERATION  AGE",
		"\nGPUs: 1 allocated of 2 requested by 1 job.\nTotal Allocated/Requested GPUs of Training Jobs: 1/2\n")
	wantMatch(t, "top job", out, `mnist  Running  1/2    2               1               gpu-a  7          \d+s +accuracy=0\.86 loss=0\.4123\n`)
	code, out, _ = k.trainyard([]string{"top", "job", "mnist"})
	wantOutput(t, "top job mnist", code, out, 0,
		"TrainJob "+k.ns+"/mnist: Running, attempt 2, 1/2 workers ready, GPUs 1 allocated of 2 requested\nIteration 7: accuracy=0.86 loss=0.4123\n",
		// No kubelet here serves the running pod's GPUs: no figure, not a zero.
		"WORKER  POD            NODE   PHASE    STATE             GPUS  GPU UTIL  GPU MEMORY  CPU  MEMORY\n",
		"0       mnist-a2-0-x2  gpu-a  Running  Running           1     -         -           4    16Gi\n",
		"1       mnist-a2-1-x2  -      Pending  ImagePullBackOff  1     -         -           4    16Gi\n")
}

func TestCLILogs(t *testing.T) {
	k := newCLICluster(t)
	runDir := filepath.Join(t.TempDir(), "results", "mnist-1234")
	job := submitRunningMNIST(k, runDir)
	t0 := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	port, queries := startFakeKubelet(t, map[string][]fakeLogLine{
		"mnist-a2-0-x2": {{at(1), "[rank 0 pid 10] starting"}, {at(3), "[rank 0 pid 10] epoch 1: loss=0.5"}, {at(5), "trainyard: worker 0 done"}},
		"mnist-a2-1-x2": {{at(2), "[rank 1 pid 11] starting"}, {at(4), "[rank 1 pid 11] epoch 1: loss=0.6"}},
		"mnist-a3-0-x3": {{at(10), "[rank 0 pid 20] resuming from checkpoint_000007"}},
		"mnist-a3-1-x3": {{at(11), "[rank 1 pid 21] resuming from checkpoint_000007"}},
	})
	k.node("gpu-a", 8, "64", "512Gi", port)
	k.workerPod(job, 2, 0, "gpu-a", 1, stateDone)
	k.workerPod(job, 2, 1, "gpu-a", 1, stateDone)
	logs := []string{"logs", "mnist"}

	// As Arena's: worker 0's pod (rank 0's) unless -i names another, or --all-ranks.
	worker0 := "[rank 0 pid 10] starting\n[rank 0 pid 10] epoch 1: loss=0.5\ntrainyard: worker 0 done\n"
	worker1 := "[rank 1 pid 11] starting\n[rank 1 pid 11] epoch 1: loss=0.6\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, worker0},
		{[]string{"-i", "worker-1"}, worker1},
		{[]string{"--instance", "mnist-a2-1-x2"}, worker1},
		{[]string{"--all-ranks"}, "[rank 0 pid 10] starting\n[rank 1 pid 11] starting\n[rank 0 pid 10] epoch 1: loss=0.5\n" +
			"[rank 1 pid 11] epoch 1: loss=0.6\ntrainyard: worker 0 done\n"},
		{[]string{"--rank", "1"}, worker1},
		{[]string{"-t", "2"}, "[rank 0 pid 10] epoch 1: loss=0.5\ntrainyard: worker 0 done\n"},
		{[]string{"--all-ranks", "-t", "2"}, "[rank 1 pid 11] epoch 1: loss=0.6\ntrainyard: worker 0 done\n"},
		{[]string{"-i", "worker-1", "--timestamps"}, "2026-11-22T13:00:02Z [rank 1 pid 11] starting\n2026-11-22T13:00:04Z [rank 1 pid 11] epoch 1: loss=0.6\n"},
		{[]string{"--since", "1s"}, ""}, // the lines are days older
		{[]string{"--since", "1000000h"}, worker0},
		{[]string{"--since-time", "2026-11-22T13:00:02Z"}, "[rank 0 pid 10] epoch 1: loss=0.5\ntrainyard: worker 0 done\n"},
	} {
		code, out, _ := k.trainyard(logs, c.args...)
		if code != 0 || out != c.want {
			t.Errorf("logs %s: exit %d:\n%s\nwant:\n%s", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	// --since is the pod log API's sinceSeconds, which the API server passes on to the kubelet.
	sent := map[string]bool{}
	for _, q := range queries() {
		sent[q.Get("sinceSeconds")+"/"+q.Get("sinceTime")] = true
	}
	if !sent["1/"] || !sent["3600000000/"] || !sent["/2026-11-22T13:00:02Z"] {
		t.Errorf("the kubelet was sent sinceSeconds/sinceTime %v; want 1, 3600000000 and 2026-11-22T13:00:02Z", sent)
	}
	k.setJobStatus("mnist", func(st *v1alpha1.TrainJobStatus) { st.Phase = v1alpha1.PhaseSucceeded })
	code, out, errOut := k.trainyard(logs, "-f", "--all-ranks")
	wantOutput(t, "logs -f --all-ranks", code, out, 0, "[rank 0 pid 10] starting\n", "[rank 1 pid 11] epoch 1: loss=0.6\n", "trainyard: worker 0 done\n")
	wantOutput(t, "logs -f --all-ranks", code, errOut, 0, "trainyard: TrainJob mnist succeeded")

	// -f follows attempt after attempt, until the job ends.
	k.setJobStatus("mnist", func(st *v1alpha1.TrainJobStatus) { st.Phase = v1alpha1.PhaseRunning })
	k.workerPod(job, 3, 0, "gpu-a", 1, stateDone)
	k.workerPod(job, 3, 1, "gpu-a", 1, stateDone)
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the operator starts attempt 3 while attempt 2 is followed
		j := &v1alpha1.TrainJob{}
		err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: "mnist"}, j)
		if err == nil {
			j.Status.Attempt, j.Status.Restarts, j.Status.Phase, j.Status.Reason = 3, 2, v1alpha1.PhaseSucceeded, "all 2 workers succeeded in attempt 3"
			err = k.env.Client.Status().Update(k.ctx, j)
		}
		restarted <- err
	}()
	code, out, errOut = k.trainyard(logs, "-f")
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	wantOutput(t, "logs -f over two attempts", code, out, 0, "[rank 0 pid 10] epoch 1: loss=0.5\n", "[rank 0 pid 20] resuming from checkpoint_000007\n")
	if strings.Contains(out, "[rank 1") {
		t.Errorf("logs -f prints worker 1's lines:\n%s", out)
	}
	wantOutput(t, "logs -f over two attempts", code, errOut, 0, "trainyard: attempt 3 of mnist started",
		"trainyard: TrainJob mnist succeeded: all 2 workers succeeded in attempt 3\n")

	// The first attempt's pods are gone: its logs come from the run folder.
	writeTestFile(t, filepath.Join(runDir, "logs", "attempt-1", "rank-0.log"), "first line of rank 0\nsecond line of rank 0\n")
	writeTestFile(t, filepath.Join(runDir, "logs", "attempt-1", "rank-1.log"), "first line of rank 1\n")
	code, out, errOut = k.trainyard(logs, "--attempt", "1")
	if want := "[rank 0] first line of rank 0\n[rank 0] second line of rank 0\n"; code != 0 || out != want {
		t.Errorf("logs --attempt 1: exit %d, %q; want worker 0's %q", code, out, want)
	}
	wantOutput(t, "logs --attempt 1", code, errOut, 0, "trainyard: the pods of attempt 1 of mnist are gone; reading the rank logs in "+runDir)
	code, out, _ = k.trainyard(logs, "--attempt", "1", "-i", "worker-1")
	if code != 0 || out != "[rank 1] first line of rank 1\n" {
		t.Errorf("logs --attempt 1 -i worker-1: exit %d, %q", code, out)
	}
	code, out, _ = k.trainyard(logs, "--attempt", "1", "--all-ranks")
	wantOutput(t, "logs --attempt 1 --all-ranks", code, out, 0, "[rank 0] first line of rank 0\n[rank 0] second line of rank 0\n[rank 1] first line of rank 1\n")
	code, out, _ = k.trainyard(logs, "--attempt", "1", "--rank", "0", "-t", "1")
	if code != 0 || out != "second line of rank 0\n" {
		t.Errorf("logs --attempt 1 --rank 0 -t 1: exit %d, %q", code, out)
	}
	code, out, _ = k.trainyard(logs, "--attempt", "1", "-f", "--all-ranks")
	wantOutput(t, "logs --attempt 1 -f --all-ranks", code, out, 0, "[rank 0] second line of rank 0\n", "[rank 1] first line of rank 1\n")

	// A copy of the storage path elsewhere.
	code, out, _ = k.trainyard(logs, "--attempt", "1", "--from", filepath.Dir(runDir), "--rank", "1")
	if code != 0 || out != "first line of rank 1\n" {
		t.Errorf("logs --from: exit %d, %q", code, out)
	}
	code, _, errOut = k.trainyard(logs, "--attempt", "1", "--from", t.TempDir())
	wantOutput(t, "logs --from an empty folder", code, errOut, 1, "holds logs/attempt-1")

	// Attempt 4's pods are on a node the API server cannot reach: the run folder again.
	k.setJobStatus("mnist", func(st *v1alpha1.TrainJobStatus) { st.Phase, st.Attempt = v1alpha1.PhaseRunning, 4 })
	k.workerPod(job, 4, 0, "gone-node", 1, stateRunning)
	writeTestFile(t, filepath.Join(runDir, "logs", "attempt-4", "rank-0.log"), "rank 0 in attempt 4\n")
	code, out, errOut = k.trainyard(logs, "--timestamps")
	wantOutput(t, "logs of an unreachable pod", code, out, 0, "[rank 0] rank 0 in attempt 4\n")
	wantOutput(t, "logs of an unreachable pod", code, errOut, 0, "trainyard: the cluster cannot give the log of pod mnist-a4-0-x4 (its node gone-node is gone)",
		"reading the rank logs in "+runDir, "trainyard: the rank logs have no timestamps: --since, --since-time and --timestamps do not apply to them\n")

	// Neither the pods nor the run folder: where the logs were, and what to do.
	if err := os.RemoveAll(runDir); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = k.trainyard(logs, "--attempt", "1")
	wantOutput(t, "logs without pods or run folder", code, errOut, 1,
		"trainyard: the pods of attempt 1 of mnist are gone, and its run folder "+runDir+" was on the pods' own storage "+
			"(no volume is mounted at the storage path), so attempt 1's logs went with its pods\n")
	job = k.job("mnist")
	job.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "results", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "results"}}}}
	job.Spec.Kubernetes.VolumeMounts = []corev1.VolumeMount{{Name: "results", MountPath: "/trainyard/results"}}
	if err := k.env.Client.Update(k.ctx, job); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = k.trainyard(logs, "--attempt", "1")
	wantOutput(t, "logs without pods or run folder", code, errOut, 1,
		"trainyard: the pods of attempt 1 of mnist are gone, and attempt 1's rank logs are kept in "+filepath.Join(runDir, "logs", "attempt-1")+
			" on the job's storage volume, which is not mounted here: mount it at /trainyard/results, or copy the run folder here and give --from DIR\n")
}

func TestCLINoCluster(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeTestFile(t, kubeconfig, `apiVersion: v1
kind: Config
current-context: nowhere
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: me, user: {token: x}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: me}}]
`)
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"unreachable":  {args: []string{"list", "--kube", "--kubeconfig", kubeconfig}, code: 1, want: `trainyard: cannot reach the Kubernetes API server of context "nowhere" (https://127.0.0.1:1)`},
		"no such file": {args: []string{"get", "x", "--kube", "--kubeconfig", filepath.Join(dir, "none")}, code: 2, want: "trainyard: --kubeconfig: stat "},
		"no --kube":    {args: []string{"list", "--kubeconfig", kubeconfig}, code: 2, want: "trainyard: --kubeconfig: only with --kube"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := cli.Main(context.Background(), tc.args, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
			if code != tc.code || !strings.HasPrefix(errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut.String(), tc.code, tc.want)
			}
		})
	}
}

// A cluster without Trainyard's CRD: every command says to install it.
func TestCLIWithoutCRD(t *testing.T) {
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	for _, c := range []struct{ words, rest []string }{
		{words: []string{"list"}}, {words: []string{"get", "mnist"}}, {words: []string{"top", "job"}},
		{words: []string{"submit"}, rest: []string{"--image", "img:1", "--", "true"}},
	} {
		var out, errOut bytes.Buffer
		args := append(append(append([]string{}, c.words...), "--kube", "--kubeconfig", env.Kubeconfig), c.rest...)
		code := cli.Main(context.Background(), args, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
		if code != 1 || !strings.Contains(errOut.String(), "does not serve TrainJobs (trainyard.dev/v1alpha1): install Trainyard's operator first ('trainyard install')") {
			t.Errorf("%v: exit %d, %q", args, code, errOut.String())
		}
	}
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Arena's --data on a real API server: a claim that does not exist is refused and nothing
// is created; one that does is mounted in the TrainJob; data list shows the claims.
func TestCLIData(t *testing.T) {
	k := newCLICluster(t)
	submit := []string{"submit"}
	code, _, errOut := k.trainyard(submit, "--name", "arena", "--image", "img:1", "--data", "training-data:/mnist_data", "--", "python3", "train.py")
	if code != 2 || !strings.Contains(errOut, `--data training-data:/mnist_data: PersistentVolumeClaim "training-data" not found in namespace "`+k.ns+`"`) {
		t.Errorf("a missing claim: exit %d, %s", code, errOut)
	}
	if err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: "arena"}, &v1alpha1.TrainJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("a TrainJob was created with a missing claim: %v", err)
	}

	class := "standard"
	k.create(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "training-data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}})
	code, out, _ := k.trainyard([]string{"data", "list"})
	wantOutput(t, "data list", code, out, 0, "NAME           STATUS   CAPACITY          ACCESS MODES  STORAGECLASS  AGE")
	wantMatch(t, "data list", out, `training-data  Pending  10Gi \(requested\)  RWX           standard      \d+s`)

	code, _, errOut = k.trainyard(submit, "--name", "arena", "--image", "img:1", "--data", "training-data:/mnist_data:ro", "--", "python3", "train.py")
	if code != 0 {
		t.Fatalf("submit with an existing claim: exit %d, %s", code, errOut)
	}
	job := k.job("arena")
	kube := job.Spec.Kubernetes
	if len(kube.Volumes) != 1 || kube.Volumes[0].PersistentVolumeClaim.ClaimName != "training-data" ||
		len(kube.VolumeMounts) != 1 || kube.VolumeMounts[0].MountPath != "/mnist_data" || !kube.VolumeMounts[0].ReadOnly {
		t.Errorf("the TrainJob's volumes %+v, mounts %+v", kube.Volumes, kube.VolumeMounts)
	}
}

// What submit --kube --dry-run=client prints is what kubectl apply takes: created on the
// API server as it is (the CRD's validation included), it is the TrainJob a submit makes.
func TestCLIDryRunApplies(t *testing.T) {
	k := newCLICluster(t)
	code, out, errOut := k.trainyard([]string{"submit"}, "--dry-run=client", "--name", "mnist-gpu", "--image", "img:1",
		"--workers", "2", "--gpus-per-worker", "1", "--", "python3", "train.py")
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errOut)
	}
	var obj map[string]any
	if err := sigsyaml.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("the dry run's output is not one YAML document: %v\n%s", err, out)
	}
	if err := k.env.Client.Create(k.ctx, &unstructured.Unstructured{Object: obj}); err != nil {
		t.Fatalf("create what the dry run printed (as kubectl apply would): %v\n%s", err, out)
	}
	job := k.job("mnist-gpu")
	if job.Spec.WorkerCount() != 2 || job.Spec.Resources.GPU != 1 || job.Spec.Kubernetes.Image != "img:1" {
		t.Errorf("applied TrainJob: %+v", job.Spec)
	}
}
