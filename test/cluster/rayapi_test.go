package cluster

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/testcluster"
)

// Ray's Jobs API served in the cluster (install --ray-api-image): a Ray user's road, as
// KubeRay's guides teach it. The working folder is uploaded as Ray's clients do (PUT
// /api/packages/gcs/_ray_pkg_<hash>.zip), the job submitted with no submission_id and a
// `cd dir && python` entrypoint, over the server's address (the pod's: the test cluster
// has no kube-proxy for the Service's ClusterIP) with the token from its Secret. The
// script is a Ray Train TorchTrainer of 2 workers with no RunConfig name: its gang runs
// as a TrainJob of 2 worker pods, and the job's log has both ranks' lines.

// rayAPI is the in-cluster Jobs API of a test.
type rayAPI struct {
	base, token string
}

func (r rayAPI) do(t *testing.T, method, path string, body []byte, contentType string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, out
}

// installRayAPI installs the operator with Ray's Jobs API (the worker image, the shared
// claim) and returns the API once its pod is ready.
func installRayAPI(t *testing.T, ctx context.Context) rayAPI {
	t.Helper()
	sharedClaim(t, ctx)
	installOperator(t)
	code, out, errOut := trainyardCmd(t, ctx, "install", "--image", testcluster.TrainyardImage,
		"--worker-cpu-per-gpu", testcluster.WorkerCPUPerGPU, "--worker-memory-per-gpu", testcluster.WorkerMemoryPerGPU,
		"--room-probe-image", testcluster.PauseImage, "--ray-api-image", testcluster.WorkerImage, "--ray-api-claim", "shared")
	if code != 0 {
		t.Fatalf("install --ray-api-image: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		// Before the operator's uninstall (cleanups run last first): its own objects.
		if code, out, errOut := trainyardCmd(t, context.Background(), "uninstall", "--yes", "--keep-crd"); code != 0 {
			t.Logf("uninstall: exit %d\n%s%s", code, out, errOut)
		}
	})
	secret, err := cl.Client.CoreV1().Secrets("default").Get(ctx, "trainyard-ray-api-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	waitFor(t, "the Jobs API's pod ready", 3*time.Minute, func() bool {
		pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=ray-api"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		p := pods.Items[0]
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ip = p.Status.PodIP
				return true
			}
		}
		return false
	})
	return rayAPI{base: "http://" + ip + ":8265", token: string(secret.Data["token"])}
}

// zipFolder packs files (name -> content) as Ray's clients pack a working_dir.
func zipFolder(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// submit submits a job as Ray's clients do, without a submission_id, and returns the one
// the server gave it.
func (r rayAPI) submit(t *testing.T, entrypoint, workingDir string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"entrypoint": entrypoint, "runtime_env": map[string]any{"working_dir": workingDir}})
	code, out := r.do(t, "POST", "/api/jobs/", body, "application/json")
	if code != http.StatusOK {
		t.Fatalf("submit: %d %s", code, out)
	}
	var sub struct {
		SubmissionID string `json:"submission_id"`
	}
	if err := json.Unmarshal(out, &sub); err != nil || !strings.HasPrefix(sub.SubmissionID, "raysubmit_") {
		t.Fatalf("submit answered %s (%v); want Ray's default submission_id", out, err)
	}
	return sub.SubmissionID
}

// rayJobState is what GET /api/jobs/<id> says.
type rayJobState struct {
	Status, Message string
}

// wait polls the job until ok, for timeout at most.
func (r rayAPI) wait(t *testing.T, id string, timeout time.Duration, ok func(rayJobState) bool) rayJobState {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := r.do(t, "GET", "/api/jobs/"+id, nil, "")
		if code != http.StatusOK {
			t.Fatalf("job status: %d %s", code, body)
		}
		var j rayJobState
		_ = json.Unmarshal(body, &j)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			_, logs := r.do(t, "GET", "/api/jobs/"+id+"/logs", nil, "")
			t.Fatalf("job %s: %s (%s) after %s; logs:\n%s", id, j.Status, j.Message, timeout, logs)
		}
		time.Sleep(2 * time.Second)
	}
}

// gangsOf lists the TrainJobs of a submission's gangs.
func gangsOf(t *testing.T, ctx context.Context, id string) []gangTrainJob {
	t.Helper()
	b, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs").
		Param("labelSelector", "trainyard.dev/ray-job="+id).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []gangTrainJob }
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// gangTrainJob is what the test reads of a gang's TrainJob.
type gangTrainJob struct {
	Metadata struct{ Name string }
	Spec     struct{ Workers int }
	Status   trainJobStatus
}

func TestRayJobsAPIInTheCluster(t *testing.T) {
	cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	api := installRayAPI(t, ctx)
	src, err := os.ReadFile(filepath.Join("..", "e2e", "testdata", "ray_server_gang.py"))
	if err != nil {
		t.Fatal(err)
	}
	pkg := zipFolder(t, map[string]string{"project/train.py": string(src)})
	if code, body := api.do(t, "PUT", "/api/packages/gcs/_ray_pkg_3f2a1b0c9d8e7f60.zip", pkg, "application/octet-stream"); code != http.StatusOK {
		t.Fatalf("upload the working_dir: %d %s", code, body)
	}
	const workingDir = "gcs://_ray_pkg_3f2a1b0c9d8e7f60.zip"
	id := api.submit(t, "cd project && python3 train.py 2 gpu=0 cpu=0.2", workingDir)
	job := api.wait(t, id, 8*time.Minute, func(j rayJobState) bool { return j.Status != "PENDING" && j.Status != "RUNNING" })
	_, logs := api.do(t, "GET", "/api/jobs/"+id+"/logs", nil, "")
	if job.Status != "SUCCEEDED" || strings.Count(string(logs), "GANG rank=") != 2 || !strings.Contains(string(logs), "DRIVER RESULT") {
		t.Fatalf("job %s: %s (%s), want SUCCEEDED with a gang of 2 and the driver's result; logs:\n%s", id, job.Status, job.Message, logs)
	}
	// The gang ran as a TrainJob of 2 worker pods, labelled with the submission.
	gangs := gangsOf(t, ctx, id)
	if len(gangs) != 1 || gangs[0].Spec.Workers != 2 || gangs[0].Status.Phase != "Succeeded" {
		t.Fatalf("TrainJobs of %s: %+v; want one of 2 workers, Succeeded", id, gangs)
	}
	fmt.Fprintf(os.Stderr, "ray job %s ran its gang as TrainJob %s\n", id, gangs[0].Metadata.Name)

	// ray job stop stops the gang: its TrainJob is deleted.
	held := api.submit(t, "cd project && python3 train.py 2 gpu=0 cpu=0.2 hold=/shared/never", workingDir)
	waitFor(t, "the held job's gang running", 5*time.Minute, func() bool {
		g := gangsOf(t, ctx, held)
		return len(g) == 1 && g[0].Status.Phase == "Running"
	})
	if code, body := api.do(t, "POST", "/api/jobs/"+held+"/stop", nil, ""); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	stopped := api.wait(t, held, 2*time.Minute, func(j rayJobState) bool { return j.Status != "PENDING" && j.Status != "RUNNING" })
	if stopped.Status != "STOPPED" {
		t.Errorf("the held job after ray job stop: %s (%s); want STOPPED", stopped.Status, stopped.Message)
	}
	waitFor(t, "the stopped job's TrainJob deleted", time.Minute, func() bool { return len(gangsOf(t, ctx, held)) == 0 })

	// ray job delete deletes the gang's TrainJob.
	if code, body := api.do(t, "DELETE", "/api/jobs/"+id, nil, ""); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	waitFor(t, "the deleted job's TrainJob deleted", time.Minute, func() bool { return len(gangsOf(t, ctx, id)) == 0 })

	// A gang the cluster cannot hold: the job's log says why at once, and it waits as a pod
	// does (a cluster may grow), until it is stopped.
	big := api.submit(t, "cd project && python3 train.py 2 gpu=0 cpu=64", workingDir)
	waitFor(t, "the big job's log saying why its gang waits", 3*time.Minute, func() bool {
		_, logs := api.do(t, "GET", "/api/jobs/"+big+"/logs", nil, "")
		return strings.Contains(string(logs), "cannot be scheduled") && strings.Contains(string(logs), "Insufficient cpu")
	})
	if code, body := api.do(t, "POST", "/api/jobs/"+big+"/stop", nil, ""); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	api.wait(t, big, 2*time.Minute, func(j rayJobState) bool { return j.Status == "STOPPED" })
	waitFor(t, "the big job's TrainJob deleted", time.Minute, func() bool { return len(gangsOf(t, ctx, big)) == 0 })

	// What the server's ServiceAccount (so any job's code in its pod) may do: its gangs'
	// TrainJobs in its own namespace, and nothing in another, nor Secrets.
	sa := "system:serviceaccount:default:trainyard-ray-api"
	for _, c := range []struct {
		ns, group, resource, verb string
		allowed                   bool
	}{
		{"default", "trainyard.dev", "trainjobs", "create", true},
		{"team-b", "trainyard.dev", "trainjobs", "create", false},
		{"default", "", "secrets", "get", false},
		{"default", "", "pods", "create", false},
	} {
		review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:default"},
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: c.ns, Group: c.group, Resource: c.resource, Verb: c.verb}}}
		got, err := cl.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != c.allowed {
			t.Errorf("the Jobs API's ServiceAccount may %s %s in %s: %v, want %v", c.verb, c.resource, c.ns, got.Status.Allowed, c.allowed)
		}
	}

	// A wrong token is refused.
	bad := rayAPI{base: api.base, token: strings.Repeat("0", 64)}
	if code, _ := bad.do(t, "GET", "/api/jobs/", nil, ""); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d; want 401 or 403", code)
	}
}
