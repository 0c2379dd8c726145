package envtest_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/dashboard"
	"github.com/trainyard/trainyard/internal/dashboard/cluster"
	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/kubeconfig"
)

// The dashboard of a cluster's TrainJobs (trainyard dashboard --kube) on a real API
// server: the job list, a job's page with its worker pods, events and conditions and
// last metrics, the cluster's GPUs, and Stop, which suspends the job.
func TestDashboardOnACluster(t *testing.T) {
	k := newCLICluster(t)
	job := submitRunningMNIST(k, "/trainyard/results/mnist-1234")
	k.node("gpu-a", 8, "64", "512Gi", 0)
	k.workerPod(job, 2, 0, "gpu-a", 1, stateRunning)
	k.workerPod(job, 2, 1, "", 1, statePulling)
	k.create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "mnist.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", APIVersion: v1alpha1.APIVersion, Namespace: k.ns, Name: "mnist", UID: job.UID},
		Reason:         "Restarting", Message: "worker 1 was evicted; starting attempt 2", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "trainyard-operator"}, Count: 2,
		FirstTimestamp: metav1.NewTime(time.Now().Add(-5 * time.Minute)), LastTimestamp: metav1.NewTime(time.Now().Add(-3 * time.Minute))})

	c, err := kubecli.Connect(&kubeconfig.Flags{Kubeconfig: k.env.Kubeconfig, Namespace: k.ns}, "dashboard-test", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ui, err := dashboard.New(dashboard.Config{Backend: &cluster.Source{Cluster: c}, Place: "namespace " + k.ns})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: time.Minute}
	get := func(path string) string {
		t.Helper()
		resp, err := browser.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		return string(body)
	}
	code := strings.TrimPrefix(ui.SignInLink().Path, "/login#code=")
	if resp, err := browser.PostForm(srv.URL+"/login", url.Values{"code": {code}}); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %v %v", resp, err)
	}

	list := get("/")
	for _, want := range []string{`data-id="mnist"`, `status running`, "attempt 2: 1 of 2 workers running", "iteration 7", "accuracy=0.86 loss=0.4123"} {
		if !strings.Contains(list, want) {
			t.Errorf("the job list lacks %q:\n%s", want, list)
		}
	}
	page := get("/jobs/mnist")
	for _, want := range []string{"Events and conditions", "worker 1 was evicted; starting attempt 2", "(×2)",
		"Condition Restarting=False", "Evicted", "pod mnist-a2-0-x2 on gpu-a: Running", "pod mnist-a2-1-x2 on -: ImagePullBackOff",
		"checkpoint_000007", `id="stop-form"`, "namespace " + k.ns} {
		if !strings.Contains(page, want) {
			t.Errorf("the job's page lacks %q:\n%s", want, page)
		}
	}
	if res := get("/jobs/mnist/results.json"); !strings.Contains(res, `"iteration":7`) || !strings.Contains(res, `"loss":0.4123`) {
		t.Errorf("results: %s", res)
	}
	if machine := get("/machine"); !regexp.MustCompile(`GPUs</dt><dd>1 of 8 allocated, 7 free`).MatchString(machine) {
		t.Errorf("the machine page does not show the cluster's GPUs:\n%s", machine)
	}

	csrf := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no CSRF token on the job's page")
	}
	resp, err := browser.PostForm(srv.URL+"/jobs/mnist/stop", url.Values{"csrf": {csrf[1]}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %v %v", resp, err)
	}
	if !k.job("mnist").Spec.Suspend {
		t.Error("Stop did not suspend the TrainJob")
	}
	if _, err := browser.Get(srv.URL + "/jobs/nope"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := browser.Get(srv.URL + "/jobs/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown TrainJob: %s, want 404", resp.Status)
	}

	// Delete deletes the TrainJob and shows the job list.
	resp, err = browser.PostForm(srv.URL+"/jobs/mnist/delete", url.Values{"csrf": {csrf[1]}})
	if err != nil || resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("delete: %v %v", resp, err)
	}
	err = k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: "mnist"}, &v1alpha1.TrainJob{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("after Delete the TrainJob is still there (%v)", err)
	}
}
