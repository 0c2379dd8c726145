package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// rayJob is what Ray's GET /api/jobs/{id} says of a job (the fields a test reads).
type rayJob struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// ray sends a request to the server's Ray Jobs API with the server's token, as Ray's
// JobSubmissionClient does, and returns the status and body.
func (s *jobServer) ray(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.addr+path, in)
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(s.dir, "config", "token"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// rayJob returns what the Ray API says of a job.
func (s *jobServer) rayJob(t *testing.T, id string) rayJob {
	t.Helper()
	code, body := s.ray(t, http.MethodGet, "/api/jobs/"+id, nil)
	var j rayJob
	if code != http.StatusOK || json.Unmarshal(body, &j) != nil {
		t.Fatalf("GET /api/jobs/%s: %d %s", id, code, body)
	}
	return j
}

// rayLogs returns a job's driver log from the Ray API.
func (s *jobServer) rayLogs(t *testing.T, id string) string {
	t.Helper()
	code, body := s.ray(t, http.MethodGet, "/api/jobs/"+id+"/logs", nil)
	var l struct {
		Logs string `json:"logs"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
		t.Fatalf("GET /api/jobs/%s/logs: %d %s", id, code, body)
	}
	return l.Logs
}

// raySubmit submits an entrypoint through the Ray API under the submission ID id.
func (s *jobServer) raySubmit(t *testing.T, id, entrypoint string) {
	t.Helper()
	code, body := s.ray(t, http.MethodPost, "/api/jobs/", map[string]any{"entrypoint": entrypoint, "submission_id": id})
	if code != http.StatusOK {
		t.Fatalf("POST /api/jobs/ %s: %d %s", id, code, body)
	}
}

// waitRay waits until the Ray API's job satisfies ok, and returns it.
func (s *jobServer) waitRay(t *testing.T, id string, timeout time.Duration, ok func(rayJob) bool) rayJob {
	t.Helper()
	var j rayJob
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if j = s.rayJob(t, id); ok(j) {
			return j
		}
	}
	t.Fatalf("job %s is %+v after %s; its log:\n%s\nserver:\n%s", id, j, timeout, s.rayLogs(t, id), s.out)
	return j
}

var gangWorker = regexp.MustCompile(`GANG rank=(\d) world=2 cuda=\[(\d)\]`)

// A Ray Train script submitted through Ray's Jobs API is Ray's driver: its fit() leases
// the GPUs of its gang (2 workers, use_gpu=True) from the server's scheduler. While
// another job holds 3 of the 4 GPUs, the gang waits and the job's message and the driver's
// log say why; when they are freed, each worker gets a GPU of its own, and the lease is
// given back when the gang ends. A gang larger than the server is refused with a message
// saying so, and nothing waits.
func TestRayJobLeasesItsGangsGPUs(t *testing.T) {
	needPlainTorch(t)
	dir := t.TempDir()
	s := newJobServer(t, dir)
	s.restartWith(t, s.env, append(fakeSMI(t), "PYTHONPATH=", "PYTHONUSERBASE="+t.TempDir())...)
	defer s.stopJobs(t)
	release := filepath.Join(dir, "release")
	code, out := s.cli(t, "submit", "--no-wait", "--gpus-per-worker", "3", "--procs-per-worker", "1", "--cpus-per-worker", "100m",
		"--", "sh", "-c", "until [ -f "+release+" ]; do sleep 0.2; done")
	holder := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("submit the job that holds 3 GPUs: exit %d\n%s", code, out)
	}
	s.waitStatus(t, holder, 30*time.Second, "RUNNING")

	// The holder's rank and its GPUs' use, as Arena's top job shows them, and in /metrics.
	rank0 := regexp.MustCompile(`(?m)^0\s+0\s+\d+\s+0,1,2\s+0%\s+3/244677 MiB$`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, out := s.cli(t, "top", "job", holder)
		if code == 0 && rank0.MatchString(out) {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(out, "no attempt yet") {
			t.Errorf("top job %s: exit %d, want rank 0 on GPUs 0,1,2:\n%s", holder, code, out)
			break
		}
	}
	if code, body := s.ray(t, http.MethodGet, "/metrics", nil); code != http.StatusOK ||
		!strings.Contains(string(body), `trainyard_gpu_memory_used_bytes{gpu="2",job="`+holder+`",worker="0"} 1.048576e+06`) {
		t.Errorf("/metrics: %d, want GPU 2's memory held by %s:\n%s", code, holder, body)
	}

	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_server_gang.py")
	s.raySubmit(t, "ray-gang", python+" "+script+" 2")
	waiting := s.waitRay(t, "ray-gang", 60*time.Second, func(j rayJob) bool {
		return j.Status == "RUNNING" && strings.Contains(j.Message, "waits for GPUs")
	})
	if want := "its gang (2 workers × 1 GPU) waits for GPUs: needs 2 GPUs, 1 free"; waiting.Message != want {
		t.Errorf("message while the gang waits: %q, want %q", waiting.Message, want)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.rayLogs(t, "ray-gang"), "waiting for GPUs: needs 2 GPUs, 1 free"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the driver's log does not say why its gang waits:\n%s", s.rayLogs(t, "ray-gang"))
		}
	}

	if code, out := s.cli(t, "get", "ray-gang"); code != 0 || !strings.Contains(out, "Gang:         2 workers x 1 GPU each, waiting for GPUs") {
		t.Errorf("get while the gang waits: exit %d\n%s", code, out)
	}

	writeFile(t, release, "")
	s.waitStatus(t, holder, 30*time.Second, "SUCCEEDED")
	done := s.waitRay(t, "ray-gang", 120*time.Second, func(j rayJob) bool { return j.Status != "RUNNING" })
	logs := s.rayLogs(t, "ray-gang")
	if done.Status != "SUCCEEDED" {
		t.Fatalf("the Ray job is %+v, want SUCCEEDED; its log:\n%s", done, logs)
	}
	workers := gangWorker.FindAllStringSubmatch(logs, -1)
	var gpus []string
	for _, w := range workers {
		gpus = append(gpus, w[2])
	}
	slices.Sort(gpus)
	if len(workers) != 2 || gpus[0] == gpus[1] {
		t.Errorf("workers %v: want 2, each on a GPU of its own; log:\n%s", workers, logs)
	}
	if !strings.Contains(logs, "trainyard: the server granted GPUs ") || !strings.Contains(logs, "DRIVER RESULT metrics={'step': 1}") {
		t.Errorf("the driver's log lacks the grant or the Result:\n%s", logs)
	}
	if msg := s.rayJob(t, "ray-gang").Message; strings.Contains(msg, "waits") {
		t.Errorf("message after the run: %q", msg)
	}
	code, out = s.cli(t, "top", "node", "-o", "json")
	var node struct {
		GPUs struct {
			Allocated *int `json:"allocated"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &node); code != 0 || err != nil || node.GPUs.Allocated == nil || *node.GPUs.Allocated != 0 {
		t.Errorf("the gang's GPUs are still held after it ended: top node exit %d\n%s", code, out)
	}

	s.raySubmit(t, "ray-too-big", python+" "+script+" 5")
	big := s.waitRay(t, "ray-too-big", 60*time.Second, func(j rayJob) bool { return j.Status != "RUNNING" && j.Status != "PENDING" })
	logs = s.rayLogs(t, "ray-too-big")
	if big.Status != "FAILED" || !strings.Contains(logs, "the gang can never run on this server: the job needs 5 GPUs (5 workers x 1) but this machine has 4") {
		t.Errorf("a gang of 5 GPUs on a server of 4: %+v, log:\n%s", big, logs)
	}
}
