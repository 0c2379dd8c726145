package main

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
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/testcluster"
)

// -rayapi measures Ray's Jobs API served in the cluster (issue 40): the same Ray Train
// script (test/e2e/testdata/ray_server_gang.py, 2 workers on CPUs) submitted through the
// Jobs API as Ray's clients do (a working_dir package, no submission_id, `cd && python`:
// its driver runs in the server's pod, its gang as a TrainJob), against `trainyard submit
// --kube` of the same gang (2 workers running the script, which then runs its loop in
// each). Each trial times the submission to both ranks' first line from the loop ("GANG
// rank="), alternating, -runs times each; then what a driver costs: its Python's and its
// gang's `trainyard run`'s peak memory (VmHWM) and CPU time, read from /proc (the node is
// this machine).

// rayAPIBench installs the Jobs API beside the operator and runs the trials.
func (b *bench) rayAPIBench(ctx context.Context, runs int) error {
	if out, err := b.cli("install", "--image", testcluster.TrainyardImage, "--ray-api-image", testcluster.WorkerImage,
		"--ray-api-claim", sharedClaim); err != nil {
		return fmt.Errorf("install --ray-api-image: %v: %s", err, out)
	}
	api, err := b.rayAPI(ctx)
	if err != nil {
		return err
	}
	src, err := os.ReadFile("test/e2e/testdata/ray_server_gang.py")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.shared, "code"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.shared, "code", "train.py"), src, 0o644); err != nil {
		return err
	}
	pkg, err := zipFiles(map[string]string{"project/train.py": string(src)})
	if err != nil {
		return err
	}
	const workingDir = "gcs://_ray_pkg_0b3c5d7e9f1a2b4c.zip"
	if code, body, err := api.do("PUT", "/api/packages/gcs/_ray_pkg_0b3c5d7e9f1a2b4c.zip", pkg, "application/octet-stream"); err != nil || code != 200 {
		return fmt.Errorf("upload the working_dir: %d %s %v", code, body, err)
	}
	var viaAPI, viaSubmit []time.Duration
	for i := range runs {
		d, cost, err := b.rayAPITrial(ctx, api, workingDir, i)
		if err != nil {
			return fmt.Errorf("trial %d, Jobs API: %w", i+1, err)
		}
		fmt.Printf("%s trial %d: Jobs API  submit -> 2 ranks in the loop %6.2f s; driver: %s; load %s\n",
			time.Now().UTC().Format("15:04:05"), i+1, d.Seconds(), cost, loadavg())
		viaAPI = append(viaAPI, d)
		if d, err = b.submitKubeTrial(ctx, fmt.Sprintf("kube-%d", i)); err != nil {
			return fmt.Errorf("trial %d, submit --kube: %w", i+1, err)
		}
		fmt.Printf("%s trial %d: submit --kube       -> 2 ranks in the loop %6.2f s; load %s\n",
			time.Now().UTC().Format("15:04:05"), i+1, d.Seconds(), loadavg())
		viaSubmit = append(viaSubmit, d)
	}
	fmt.Printf("\nmedians of %d trials: submit -> 2 ranks in the loop: Jobs API %s, submit --kube %s; ratio %.2f (goal at most 1.2)\n",
		runs, median(viaAPI), median(viaSubmit), float64(median(viaAPI))/float64(median(viaSubmit)))
	return nil
}

// jobsAPI is the in-cluster Jobs API.
type jobsAPI struct{ base, token string }

func (a jobsAPI) do(method, path string, body []byte, contentType string) (int, []byte, error) {
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, out, err
}

// rayAPI waits for the Jobs API's pod and returns its address (the pod's: the test
// cluster has no kube-proxy) and token.
func (b *bench) rayAPI(ctx context.Context) (jobsAPI, error) {
	var api jobsAPI
	err := poll(3*time.Minute, "the Jobs API's pod ready", func() bool {
		pods, err := b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=ray-api"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		for _, c := range pods.Items[0].Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				api.base = "http://" + pods.Items[0].Status.PodIP + ":8265"
				return true
			}
		}
		return false
	})
	if err != nil {
		return api, err
	}
	s, err := b.cl.Client.CoreV1().Secrets("default").Get(ctx, "trainyard-ray-api-token", metav1.GetOptions{})
	if err != nil {
		return api, err
	}
	api.token = string(s.Data["token"])
	return api, nil
}

// rayAPITrial submits the script through the Jobs API and times it to both ranks in the
// loop; it returns what the driver cost once the job ended.
func (b *bench) rayAPITrial(ctx context.Context, api jobsAPI, workingDir string, i int) (time.Duration, string, error) {
	tag := fmt.Sprintf("trial=%d", i)
	release := fmt.Sprintf("release-api-%d", i) // the ranks wait for it after their first line
	body, _ := json.Marshal(map[string]any{"entrypoint": "cd project && python3 train.py 2 gpu=0 cpu=0.2 hold=/shared/" + release + " " + tag,
		"runtime_env": map[string]any{"working_dir": workingDir}})
	start := time.Now()
	code, out, err := api.do("POST", "/api/jobs/", body, "application/json")
	if err != nil || code != 200 {
		return 0, "", fmt.Errorf("submit: %d %s %v", code, out, err)
	}
	var sub struct {
		SubmissionID string `json:"submission_id"`
	}
	if err := json.Unmarshal(out, &sub); err != nil {
		return 0, "", err
	}
	var gang string
	err = poll(5*time.Minute, "the gang's 2 ranks in the loop", func() bool {
		if gang == "" {
			gang = b.gangOf(ctx, sub.SubmissionID)
		}
		return gang != "" && b.ranksInLoop(ctx, gang) == 2
	})
	d := time.Since(start)
	if err != nil {
		return 0, "", err
	}
	cost := driverCost(tag, gang) // while the driver waits on its gang
	if err := os.WriteFile(filepath.Join(b.shared, release), nil, 0o644); err != nil {
		return 0, "", err
	}
	for {
		code, out, err := api.do("GET", "/api/jobs/"+sub.SubmissionID, nil, "")
		if err != nil || code != 200 {
			return 0, "", fmt.Errorf("status: %d %s %v", code, out, err)
		}
		var j struct{ Status string }
		_ = json.Unmarshal(out, &j)
		if j.Status == "SUCCEEDED" {
			break
		}
		if j.Status != "PENDING" && j.Status != "RUNNING" {
			return 0, "", fmt.Errorf("job %s: %s", sub.SubmissionID, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, out, err := api.do("DELETE", "/api/jobs/"+sub.SubmissionID, nil, ""); err != nil || code != 200 {
		return 0, "", fmt.Errorf("delete: %d %s %v", code, out, err)
	}
	return d, cost, b.settle(ctx, gang)
}

// submitKubeTrial submits the same gang with `trainyard submit --kube` and times it to
// both ranks in the loop.
func (b *bench) submitKubeTrial(ctx context.Context, name string) (time.Duration, error) {
	start := time.Now()
	if out, err := b.cli("submit", "--kube", "--name", name, "--image", testcluster.WorkerImage, "--image-pull-policy", "IfNotPresent",
		"--workers", "2", "--cpus-per-worker", "0.2", "--data", sharedClaim+":/shared", "--storage-path", "/shared/results",
		"--working-dir", "/shared/code", "--", "python3", "train.py", "2", "gpu=0", "hold=/shared/release-"+name); err != nil {
		return 0, fmt.Errorf("submit: %v: %s", err, out)
	}
	if err := poll(5*time.Minute, name+": 2 ranks in the loop", func() bool { return b.ranksInLoop(ctx, name) == 2 }); err != nil {
		return 0, err
	}
	d := time.Since(start)
	_ = os.WriteFile(filepath.Join(b.shared, "release-"+name), nil, 0o644)
	_, _ = b.cli("delete", "--kube", name)
	return d, b.settle(ctx, name)
}

// gangOf is the name of the TrainJob of a submission's gang, or "".
func (b *bench) gangOf(ctx context.Context, id string) string {
	raw, err := b.cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs").
		Param("labelSelector", "trainyard.dev/ray-job="+id).DoRaw(ctx)
	if err != nil {
		return ""
	}
	var list struct {
		Items []struct{ Metadata struct{ Name string } }
	}
	if json.Unmarshal(raw, &list) != nil || len(list.Items) == 0 {
		return ""
	}
	return list.Items[0].Metadata.Name
}

// ranksInLoop counts the job's worker pods whose log has the loop's first line.
func (b *bench) ranksInLoop(ctx context.Context, job string) int {
	pods, err := b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "trainyard.dev/job-name=" + job})
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		log, err := b.cl.Client.CoreV1().Pods("default").GetLogs(p.Name, &corev1.PodLogOptions{Container: "worker"}).DoRaw(ctx)
		if err == nil && bytes.Contains(log, []byte("GANG rank=")) {
			n++
		}
	}
	return n
}

// driverCost says what the driver of the job tagged tag costs: its Python's and its
// gang's trainyard's peak memory and CPU time, from /proc.
func driverCost(tag, gang string) string {
	var parts []string
	for _, p := range []struct{ what, needle string }{{"Python", "train.py\x002\x00"}, {"trainyard run (the gang's)", "--name\x00" + gang}} {
		pid := findProc(p.needle)
		if pid == 0 {
			continue
		}
		hwm := procStatusKB(pid, "VmHWM")
		parts = append(parts, fmt.Sprintf("%s %.1f MB peak, %.2f s CPU", p.what, float64(hwm)/1024, procCPU(pid)))
	}
	return strings.Join(parts, "; ")
}

// findProc returns a process whose command line contains needle, preferring the oldest.
func findProc(needle string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(needle)) || bytes.Contains(b, []byte("bench/cluster")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		return pid
	}
	return 0
}

// procStatusKB reads a kB field of /proc/<pid>/status.
func procStatusKB(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// procCPU is a process's user and system CPU time so far, in seconds.
func procCPU(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 13 {
			u, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			return (u + st) / 100 // clock ticks (USER_HZ 100)
		}
	}
	return 0
}

// zipFiles packs files (name -> content) as Ray's clients pack a working_dir.
func zipFiles(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(content)); err != nil {
			return nil, err
		}
	}
	err := zw.Close()
	return buf.Bytes(), err
}
