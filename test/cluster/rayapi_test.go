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
	submit, _ := json.Marshal(map[string]any{"entrypoint": "cd project && python3 train.py 2 gpu=0 cpu=0.2",
		"runtime_env": map[string]any{"working_dir": "gcs://_ray_pkg_3f2a1b0c9d8e7f60.zip"}})
	code, body := api.do(t, "POST", "/api/jobs/", submit, "application/json")
	if code != http.StatusOK {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sub struct {
		SubmissionID string `json:"submission_id"`
	}
	if err := json.Unmarshal(body, &sub); err != nil || !strings.HasPrefix(sub.SubmissionID, "raysubmit_") {
		t.Fatalf("submit answered %s (%v); want Ray's default submission_id", body, err)
	}
	var job struct {
		Status, Message string
	}
	deadline := time.Now().Add(8 * time.Minute)
	for {
		code, body = api.do(t, "GET", "/api/jobs/"+sub.SubmissionID, nil, "")
		if code != http.StatusOK {
			t.Fatalf("job status: %d %s", code, body)
		}
		_ = json.Unmarshal(body, &job)
		if job.Status != "PENDING" && job.Status != "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after 8 minutes: %s", sub.SubmissionID, job.Status, job.Message)
		}
		time.Sleep(2 * time.Second)
	}
	_, logs := api.do(t, "GET", "/api/jobs/"+sub.SubmissionID+"/logs", nil, "")
	if job.Status != "SUCCEEDED" || strings.Count(string(logs), "GANG rank=") != 2 || !strings.Contains(string(logs), "DRIVER RESULT") {
		t.Fatalf("job %s: %s (%s), want SUCCEEDED with a gang of 2 and the driver's result; logs:\n%s", sub.SubmissionID, job.Status, job.Message, logs)
	}
	// The gang ran as a TrainJob of 2 worker pods, labelled with the submission.
	b, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs").
		Param("labelSelector", "trainyard.dev/ray-job="+sub.SubmissionID).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct{ Workers int }
			Status   trainJobStatus
		}
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("TrainJobs of %s: %v, %s", sub.SubmissionID, err, b)
	}
	tj := list.Items[0]
	if tj.Spec.Workers != 2 || tj.Status.Phase != "Succeeded" {
		t.Errorf("TrainJob %s: %d workers, %s; want 2, Succeeded", tj.Metadata.Name, tj.Spec.Workers, tj.Status.Phase)
	}
	fmt.Fprintf(os.Stderr, "ray job %s ran its gang as TrainJob %s\n", sub.SubmissionID, tj.Metadata.Name)
}
