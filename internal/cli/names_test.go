package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
)

// noServer points the commands at an address where no server answers.
func noServer(t *testing.T) {
	t.Setenv("TRAINYARD_ADDRESS", "http://127.0.0.1:1")
	t.Setenv("TRAINYARD_TOKEN", testToken)
}

// results NAME finds a server job's run by its name or ID (its folder is named by ID):
// from the folder when this machine has it, else from the server; a name that is neither
// a run nor a job exits 1.
func TestResultsOfAServerJob(t *testing.T) {
	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	code, out, errOut := trainyard("submit", "--no-wait", "--name", "s1", "--", "sh", "-c", "true")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	_, out, _ = trainyard("get", "s1", "-o", "json")
	var d struct {
		Job struct {
			RunDir string `json:"runDir"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || filepath.Base(d.Job.RunDir) != id {
		t.Fatalf("get -o json: %v; runDir %q, want the folder of job %s", err, d.Job.RunDir, id)
	}
	storage := t.TempDir() // where no run is named s1
	makeRun(t, filepath.Dir(d.Job.RunDir), id, v1.PhaseSucceeded, time.Minute,
		resultLine(1, `, "loss": 0.9`), resultLine(2, `, "loss": 0.5`))

	for _, ref := range []string{"s1", id} {
		code, out, errOut = trainyard("results", "--storage-path", storage, ref)
		if code != 0 || !strings.Contains(out, "loss") || strings.Count(out, "\n") != 3 {
			t.Errorf("results %s: exit %d, stdout:\n%s\nstderr: %s", ref, code, out, errOut)
		}
	}
	// Without the run folder's record here, the server sends the results.
	if err := os.Remove(filepath.Join(d.Job.RunDir, rundir.RecordFile)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = trainyard("results", "--storage-path", storage, "s1", "-o", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 2 {
		t.Errorf("results -o json from the server: exit %d, %v:\n%s%s", code, err, out, errOut)
	}

	code, _, errOut = trainyard("results", "--storage-path", storage, "nope")
	if code != 1 || !strings.Contains(errOut, "no run nope in "+storage) || !strings.Contains(errOut, "no job with id or name 'nope'") {
		t.Errorf("results of nothing: exit %d, stderr %q; want 1, saying neither a run nor a job", code, errOut)
	}
	noServer(t)
	code, _, errOut = trainyard("results", "--storage-path", storage, "nope")
	if code != 1 || !strings.Contains(errOut, "no run nope in "+storage) || !strings.Contains(errOut, "no trainyard server at") {
		t.Errorf("results of nothing, no server: exit %d, stderr %q; want 1", code, errOut)
	}
}

// logs RUN prints a local run's console log when no server answers, or when the server
// has no such job; --rank R its rank log of the last attempt, --ranks the lines of some
// ranks; -f of a run that ended prints it and returns; not found exits 1.
func TestLogsOfALocalRun(t *testing.T) {
	storage := t.TempDir()
	dir := makeRun(t, storage, "fm", v1.PhaseSucceeded, time.Minute)
	rec, _ := rundir.ReadRecord(dir)
	rec.Attempts = []rundir.Attempt{{Number: 1}, {Number: 2}}
	data, _ := json.Marshal(rec)
	console := "trainyard: attempt 2: starting\n[rank 0 pid 10] a\n[rank 1 pid 11] b\n[ranks 0-1] c [repeated 2x across workers]\n"
	files := map[string]string{
		rundir.RecordFile:    string(data),
		rundir.ConsoleLog:    console,
		rundir.LogPath(2, 1): "b\nc\n",
		rundir.LogPath(1, 1): "old\n",
	}
	for name, text := range files {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"the console log":         {args: []string{"fm"}, want: console},
		"followed, once it ended": {args: []string{"-f", "fm"}, want: console},
		"a folder's path":         {args: []string{dir}, want: console},
		"the last lines":          {args: []string{"-t", "1", "fm"}, want: "[ranks 0-1] c [repeated 2x across workers]\n"},
		"a rank's, last attempt":  {args: []string{"--rank", "1", "fm"}, want: "b\nc\n"},
		"some ranks":              {args: []string{"--ranks", "1", "fm"}, want: "trainyard: attempt 2: starting\n[rank 1 pid 11] b\n[ranks 0-1] c [repeated 2x across workers]\n"},
		"a rank without a log":    {args: []string{"--rank", "5", "fm"}, code: 1},
		"neither a job nor a run": {args: []string{"nope"}, code: 1},
	}
	for _, server := range []string{"no server", "a server without the job"} {
		t.Run(server, func(t *testing.T) {
			if server == "no server" {
				noServer(t)
			} else {
				t.Setenv("TRAINYARD_ADDRESS", startAPI(t))
				t.Setenv("TRAINYARD_TOKEN", testToken)
			}
			for name, tc := range cases {
				t.Run(name, func(t *testing.T) {
					code, out, errOut := trainyard(append([]string{"logs", "--storage-path", storage}, tc.args...)...)
					if code != tc.code || (tc.code == 0 && out != tc.want) {
						t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, %q", code, out, errOut, tc.code, tc.want)
					}
				})
			}
		})
	}
}
