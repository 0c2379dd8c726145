package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainyard/trainyard/internal/workload"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-jobs", "100", "-assets", "/k8s"})
	if err != nil || cfg.jobs != 100 || cfg.workers != 4 || cfg.clients != 16 || cfg.assets != "/k8s" ||
		cfg.operatorQPS != 0 || cfg.trainyard != "./bin/trainyard" || cfg.kcm != "" || cfg.kuberay != "" {
		t.Fatalf("parseFlags = %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{{"-jobs", "0"}, {"-workers", "0"}, {"-clients", "0"}, {"extra"}, {"-kuberay", "/kuberay"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}

func TestParseRequestCounts(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="trainyard.dev",resource="trainjobs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 2300
apiserver_request_total{code="409",component="apiserver",dry_run="",group="trainyard.dev",resource="trainjobs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1beta1"} 1
apiserver_request_duration_seconds_count{verb="POST"} 5
`
	got, err := parseRequestCounts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[requestKey]float64{
		{"POST", "jobs", false}:            1001,
		{"PUT", "trainjobs/status", false}: 2300,
		{"PUT", "trainjobs/status", true}:  7,
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%+v = %v, want %v", k, got[k], v)
		}
	}
	if s := got.sum("PUT", "trainjobs/status"); s != 2307 {
		t.Errorf("sum = %v, want 2307", s)
	}
	before := requestCounts{{"POST", "jobs", false}: 1, {"PUT", "trainjobs/status", true}: 7}
	d := got.minus(before)
	if len(d) != 2 || d[requestKey{"POST", "jobs", false}] != 1000 {
		t.Errorf("minus = %v", d)
	}
	if rows := d.sorted(); rows[0].resource != "trainjobs/status" {
		t.Errorf("sorted = %v, want the largest first", rows)
	}
}

func TestStatFields(t *testing.T) {
	comm, f, err := statFields("4242 (kube apiserver) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 12 0")
	if err != nil || comm != "kube apiserver" || f[0] != "S" || f[1] != "1" || f[11] != "150" || f[12] != "25" {
		t.Fatalf("statFields = %q, %q, %v", comm, f, err)
	}
	if _, _, err := statFields("garbage"); err == nil {
		t.Error("statFields accepted a line without a command name")
	}
}

func TestWatched(t *testing.T) {
	tr := &tracker{kinds: map[string]*watched{kindService: {added: map[string]time.Time{}, deleted: map[string]time.Time{}}}}
	w := tr.kinds[kindService]
	t0 := time.Now()
	w.added["a"], w.added["b"] = t0, t0.Add(time.Second)
	if n, last := tr.present(kindService, []string{"a", "b", "c"}); n != 2 || !last.Equal(t0.Add(time.Second)) {
		t.Errorf("present = %d, %v", n, last)
	}
	w.deleted["a"] = t0.Add(3 * time.Second)
	if n, _ := tr.present(kindService, []string{"a", "b"}); n != 1 {
		t.Errorf("present after a went = %d, want 1", n)
	}
	if n, last := tr.gone(kindService, []string{"a", "b"}); n != 1 || !last.Equal(t0.Add(3*time.Second)) {
		t.Errorf("gone = %d, %v", n, last)
	}
}

func TestNames(t *testing.T) {
	if got := attemptNames(2, 3); got[0] != "tj-00000-a3" || got[1] != "tj-00001-a3" {
		t.Errorf("attemptNames = %q", got)
	}
	if got := podNames(1, 2, 1); len(got) != 2 || got[1] != "tj-00000-a1-1" {
		t.Errorf("podNames = %q", got)
	}
	if failedWorker(4) != 1 || failedWorker(1) != 0 {
		t.Error("failedWorker should pick worker 1, or 0 when alone")
	}
}

func TestHammer(t *testing.T) {
	done := make([]int, 100)
	if _, err := hammer(len(done), 7, func(i int) error { done[i]++; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, n := range done {
		if n != 1 {
			t.Errorf("op(%d) ran %d times, want once", i, n)
		}
	}
	boom := errors.New("boom")
	if _, err := hammer(100, 3, func(i int) error {
		if i == 10 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("hammer with a failing op = %v, want %v", err, boom)
	}
}

func TestFormat(t *testing.T) {
	if got := secs(1234 * time.Millisecond); got != "1.23 s" {
		t.Errorf("secs = %q", got)
	}
	if got := secs(123456 * time.Millisecond); got != "123.5 s" {
		t.Errorf("secs = %q", got)
	}
	if got := ratio(3*time.Second, 2*time.Second); got != "**1.50**" {
		t.Errorf("ratio = %q", got)
	}
	if got := ratio(time.Second, 0); got != "" {
		t.Errorf("ratio by zero = %q", got)
	}
}

func TestPodKey(t *testing.T) {
	cases := map[string]struct {
		name   string
		labels map[string]string
		want   string
	}{
		"the operator's pod": {"tj-00001-a2-3", map[string]string{workload.LabelJob: "tj-00001", workload.LabelAttempt: "2",
			workload.LabelWorkerIndex: "3"}, "tj-00001-a2-3"},
		"an Indexed Job's pod (the operator before 6df8120)": {"tj-00001-a1-0-x7k2p", map[string]string{workload.LabelJob: "tj-00001",
			workload.LabelAttempt: "1", workload.LabelCompletionIndex: "0"}, "tj-00001-a1-0"},
		"a Service":          {"tj-00001-a1", map[string]string{workload.LabelJob: "tj-00001", workload.LabelAttempt: "1"}, "tj-00001-a1"},
		"a RayCluster's pod": {"rc-00001-head-abcde", map[string]string{"ray.io/cluster": "rc-00001"}, "rc-00001-head-abcde"},
	}
	for name, tc := range cases {
		if got := podKey(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s: podKey = %q, want %q", name, got, tc.want)
		}
	}
}

func TestCount(t *testing.T) {
	w := &watched{added: map[string]time.Time{}, deleted: map[string]time.Time{}}
	tr := &tracker{kinds: map[string]*watched{kindPod: w}}
	t0 := time.Now()
	w.added["a"], w.added["b"], w.added["c"] = t0, t0.Add(2*time.Second), t0.Add(time.Second)
	w.deleted["b"] = t0.Add(3 * time.Second)
	if n, last := tr.count(kindPod); n != 2 || !last.Equal(t0.Add(time.Second)) {
		t.Errorf("count = %d, %v; want 2 and the later of the two present", n, last)
	}
}

func TestStatusPatches(t *testing.T) {
	var running, failed struct{ Status corev1.PodStatus }
	if err := json.Unmarshal(runningPatch(), &running); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(failedPatch(), &failed); err != nil {
		t.Fatal(err)
	}
	if running.Status.Phase != corev1.PodRunning || !running.Status.ContainerStatuses[0].Ready ||
		running.Status.ContainerStatuses[0].Name != workload.WorkerContainer {
		t.Errorf("running patch = %+v", running.Status)
	}
	if failed.Status.Phase != corev1.PodFailed || failed.Status.ContainerStatuses[0].State.Terminated.ExitCode != 1 {
		t.Errorf("failed patch = %+v", failed.Status)
	}
}

func TestRayCluster(t *testing.T) {
	rc := rayCluster(7, 4)
	if rc.GetName() != "rc-00007" || rc.GetNamespace() != rayNamespace || rc.GroupVersionKind() != rayClusterGVK {
		t.Errorf("rayCluster = %s/%s %v", rc.GetNamespace(), rc.GetName(), rc.GroupVersionKind())
	}
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	if len(groups) != 1 || groups[0].(map[string]any)["replicas"] != int64(3) {
		t.Errorf("workerGroupSpecs = %v, want one group of 3 replicas", groups)
	}
	if _, found, _ := unstructured.NestedSlice(rayCluster(0, 1).Object, "spec", "workerGroupSpecs"); found {
		t.Error("a RayCluster of 1 pod has a worker group")
	}
}

func TestKCMArgs(t *testing.T) {
	want := []string{"--kubeconfig", "/k", "--secure-port=0"}
	if diff := cmp.Diff(want, kcmArgs("/k")); diff != "" {
		t.Errorf("kcmArgs (-want +got):\n%s", diff)
	}
}
