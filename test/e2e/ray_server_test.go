package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
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
		// "waits: not scheduled yet" until the scheduler's next pass says why.
		return j.Status == "RUNNING" && strings.Contains(j.Message, "waits: ") && !strings.Contains(j.Message, "not scheduled yet")
	})
	// Its 2 CPUs (Ray's default of 1 per worker) are counted too: the driver's own is lent.
	if want := "its gang (2 workers × (1 GPU, 1 CPU)) waits: needs 2 GPUs, 1 free"; !strings.HasPrefix(waiting.Message, want) {
		t.Errorf("message while the gang waits: %q, want %q", waiting.Message, want)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.rayLogs(t, "ray-gang"), "the gang waits: needs 2 GPUs, 1 free"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the driver's log does not say why its gang waits:\n%s", s.rayLogs(t, "ray-gang"))
		}
	}

	if code, out := s.cli(t, "get", "ray-gang"); code != 0 || !strings.Contains(out, "Gang:         2 workers × (1 GPU, 1 CPU), waiting") {
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
	if big.Status != "FAILED" || !strings.Contains(logs, "the gang (5 workers × (1 GPU, 1 CPU)) can never run on this server: the job needs 5 GPUs (5 workers x 1) but this machine has 4") {
		t.Errorf("a gang of 5 GPUs on a server of 4: %+v, log:\n%s", big, logs)
	}
}

// A Ray driver's gang on CPUs is counted on the server as Ray counts it
// (resources_per_worker's CPU): while it runs, its cores are taken from the queue and
// list and get show it; one that can never fit is refused with the server's reason. Under
// trainyard run, with no server, a gang larger than the machine runs and says so.
func TestRayGangsCPUsAreCounted(t *testing.T) {
	needPlainTorch(t)
	dir := t.TempDir()
	s := newJobServer(t, dir)
	s.restartWith(t, s.env, "PYTHONPATH=", "PYTHONUSERBASE="+t.TempDir())
	defer s.stopJobs(t)
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_server_gang.py")
	cores := runtime.NumCPU()
	each := max(1, cores/2) // the two workers take the machine

	s.raySubmit(t, "ray-too-big", fmt.Sprintf("%s %s 2 gpu=0 cpu=%d", python, script, 4*cores))
	big := s.waitRay(t, "ray-too-big", 120*time.Second, func(j rayJob) bool { return j.Status != "RUNNING" && j.Status != "PENDING" })
	want := fmt.Sprintf("the gang (2 workers × (%d CPU)) can never run on this server: the job needs %d CPUs", 4*cores, 8*cores)
	if logs := s.rayLogs(t, "ray-too-big"); big.Status != "FAILED" || !strings.Contains(logs, want) {
		t.Errorf("a gang of %d CPUs on a server of %d: %+v, want FAILED saying %q; log:\n%s", 8*cores, cores, big, want, logs)
	}

	release := filepath.Join(dir, "release")
	s.raySubmit(t, "ray-cpu", fmt.Sprintf("%s %s 2 gpu=0 cpu=%d hold=%s", python, script, each, release))
	s.waitRay(t, "ray-cpu", 120*time.Second, func(j rayJob) bool {
		return slices.Contains([]string{"SUCCEEDED", "FAILED", "STOPPED"}, j.Status) ||
			strings.Count(s.rayLogs(t, "ray-cpu"), "GANG rank=") == 2
	})
	if code, out := s.cli(t, "get", "ray-cpu"); code != 0 || !strings.Contains(out, fmt.Sprintf("Gang:         2 workers × (%d CPU), running", each)) {
		t.Errorf("get while the gang runs: exit %d\n%s", code, out)
	}
	if code, out := s.cli(t, "list"); code != 0 || !regexp.MustCompile(fmt.Sprintf(`ray-cpu\s+-\s+RUNNING\s+0\s+-\s+2x%d gang`, each)).MatchString(out) {
		t.Errorf("list while the gang runs: exit %d, want its CPUS as 2x%d gang\n%s", code, each, out)
	}
	code, out := s.cli(t, "submit", "--no-wait", "--name", "after", "--cpus-per-worker", "500m", "--", "true")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	after := strings.TrimSpace(out)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, out := s.cli(t, "get", after)
		if strings.Contains(out, "needs 0.5 CPUs, 0 free") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a job of 0.5 CPUs does not wait for the gang's cores:\n%s", out)
		}
	}
	writeFile(t, release, "")
	done := s.waitRay(t, "ray-cpu", 120*time.Second, func(j rayJob) bool { return j.Status != "RUNNING" })
	if logs := s.rayLogs(t, "ray-cpu"); done.Status != "SUCCEEDED" || !strings.Contains(logs, "trainyard: the server granted the gang its CPUs") {
		t.Errorf("the Ray job is %+v, want SUCCEEDED after the grant; log:\n%s", done, logs)
	}
	if st := s.waitStatus(t, after, 60*time.Second, "SUCCEEDED", "FAILED"); st != "SUCCEEDED" {
		t.Errorf("the job that waited for the gang's cores is %s", st)
	}

	code, out = run(t, dir, []string{"PYTHONPATH="}, "run", "--storage-path", filepath.Join(dir, "local"), "--",
		python, script, "2", "gpu=0", fmt.Sprintf("cpu=%d", 4*cores))
	if msg := fmt.Sprintf("asks for %d CPUs for 2 worker(s); this machine has %d. Ray would wait for a node that has them; "+
		"Trainyard runs the gang on what this machine has", 8*cores, cores); code != 0 || !strings.Contains(out, msg) {
		t.Errorf("trainyard run of a gang larger than the machine: exit %d, want it run, saying %q:\n%s", code, msg, out)
	}
}

// raySubmitDefault submits an entrypoint through the Ray API as `ray job submit` does
// when given no --submission-id, and returns the ID the server chose.
func (s *jobServer) raySubmitDefault(t *testing.T, entrypoint string) string {
	t.Helper()
	code, body := s.ray(t, http.MethodPost, "/api/jobs/", map[string]any{"entrypoint": entrypoint, "runtime_env": map[string]any{}})
	var resp struct {
		SubmissionID string `json:"submission_id"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &resp) != nil || !strings.HasPrefix(resp.SubmissionID, "raysubmit_") {
		t.Fatalf("POST /api/jobs/ %q: %d %s; want a raysubmit_ ID", entrypoint, code, body)
	}
	return resp.SubmissionID
}

// Ray Train scripts run through every entrypoint form Ray's job clients send, with the
// ID the server chooses (raysubmit_ and mixed case, which is no run name): a shell command
// line (cd && python), bash -c, a wrapper shell script, python -m. Each finds ray, and its
// gang of 2 trains.
func TestRayEntrypointForms(t *testing.T) {
	needPlainTorch(t)
	dir := t.TempDir()
	s := newJobServer(t, dir)
	s.restartWith(t, s.env, "PYTHONPATH=", "PYTHONUSERBASE="+t.TempDir())
	defer s.stopJobs(t)
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "test", "e2e", "testdata", "ray_server_gang.py"))
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(filepath.Join(project, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(project, "train.py"), string(src))
	writeFile(t, filepath.Join(project, "pkg", "__init__.py"), "")
	writeFile(t, filepath.Join(project, "pkg", "train.py"), string(src))
	writeFile(t, filepath.Join(project, "run.sh"), "#!/bin/sh\nset -e\ncd \"$(dirname \"$0\")\"\nexec "+python+" train.py \"$@\"\n")
	forms := map[string]string{
		"cd && python": fmt.Sprintf("cd %s && %s train.py 2 gpu=0", project, python),
		"bash -c":      fmt.Sprintf("bash -c 'cd %s; %s train.py 2 gpu=0'", project, python),
		"a wrapper":    fmt.Sprintf("%s/run.sh 2 gpu=0", project),
		"python -m":    fmt.Sprintf("cd %s && %s -m pkg.train 2 gpu=0", project, python),
	}
	ids := map[string]string{}
	for name, entrypoint := range forms {
		ids[name] = s.raySubmitDefault(t, entrypoint)
	}
	for name, id := range ids {
		j := s.waitRay(t, id, 300*time.Second, func(j rayJob) bool { return j.Status != "RUNNING" && j.Status != "PENDING" })
		if logs := s.rayLogs(t, id); j.Status != "SUCCEEDED" || strings.Count(logs, "GANG rank=") != 2 {
			t.Errorf("%s (%s): %+v, want SUCCEEDED with a gang of 2; log:\n%s", name, id, j, logs)
		}
	}
	// One job is one run: after it ended, get and results show its gang's results.
	id := ids["cd && python"]
	if code, out := s.cli(t, "get", id); code != 0 || !strings.Contains(out, "Gang run:") || !strings.Contains(out, "Last result: iteration 1") {
		t.Errorf("get %s after it ended: exit %d, want its gang's run and last result:\n%s", id, code, out)
	}
	if code, out := s.cli(t, "results", id, "-o", "json"); code != 0 || !strings.Contains(out, `"step":1`) {
		t.Errorf("results %s: exit %d, want its gang's report (step 1):\n%s", id, code, out)
	}
}
