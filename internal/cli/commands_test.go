package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/server"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/upload"
)

// testToken is the token of the test server.
const testToken = "dGVzdC10b2tlbi1mb3ItdGhlLXRyYWlueWFyZC1jbGk"

// startAPI starts the real HTTP API over a jobs.Service whose scheduler never runs, so
// submitted jobs stay PENDING and nothing is started; it returns the server's URL.
func startAPI(t *testing.T) string {
	t.Helper()
	url, _ := startAPIStore(t)
	return url
}

// startAPIStore is startAPI, and also returns the service's store, where a test plays
// the scheduler's part.
func startAPIStore(t *testing.T) (string, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "jobs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	node := scheduler.Node{MilliCPU: 2000, MemoryBytes: 1 << 30}
	svc, err := jobs.New(jobs.Config{Store: st, Node: node, StateDir: dir, Binary: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := upload.NewStore(filepath.Join(dir, "packages"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(server.Config{Jobs: svc, Token: testToken, Packages: pkgs, StateDir: filepath.Join(dir, "state"),
		StoragePath: filepath.Join(dir, "runs"), Node: server.NodeConfig{Resources: node}})
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(api.Handler())
	t.Cleanup(web.Close)
	return web.URL, st
}

// trainyard runs the command line with args and returns its exit code, stdout and
// stderr.
func trainyard(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// The commands against a real server: what they print, and how they fail: one line and
// exit 1 for what the server refuses, exit 2 for bad input.
func TestCommandsAgainstServer(t *testing.T) {
	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)

	code, out, _ := trainyard("list")
	if code != 0 || out != "No jobs.\n" {
		t.Fatalf("list of no jobs: exit %d, %q", code, out)
	}
	code, out, errOut := trainyard("submit", "--no-wait", "--name", "hello", "--priority", "2", "--", "sh", "-c", "echo hi")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "raysubmit_") || errOut != "" {
		t.Fatalf("submit --no-wait: exit %d, stdout %q, stderr %q; want the job's ID alone", code, out, errOut)
	}
	code, out, _ = trainyard("list")
	if code != 0 || !strings.Contains(out, id+"  hello  PENDING  2") {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
	code, out, _ = trainyard("get", id, "-o", "json")
	if code != 0 || !strings.Contains(out, `"command": [`) || !strings.Contains(out, `"runName": "`+id+`"`) {
		t.Errorf("get -o json: exit %d:\n%s", code, out)
	}
	cases := map[string]struct {
		args []string
		code int
		want string // the one line on stderr
	}{
		"unknown job":           {args: []string{"get", "nope"}, code: 1, want: "trainyard: no job with id or name 'nope' (trainyard list shows the jobs)"},
		"delete a pending job":  {args: []string{"delete", id}, code: 1, want: "trainyard: job " + id + " is PENDING; stop it first: the job has not finished"},
		"unknown status":        {args: []string{"list", "--status", "lost"}, code: 2, want: `trainyard: status "LOST": use PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED`},
		"bad output":            {args: []string{"list", "-o", "xml"}, code: 2, want: `trainyard: --output "xml": must be wide, json, yaml, or left out for a table`},
		"bad job":               {args: []string{"submit", "--workers", "0", "--", "true"}, code: 2, want: "trainyard: invalid job: --workers (spec.workers): Invalid value: 0"},
		"wrong token":           {args: []string{"list", "--token-file", "/nonexistent/token"}, code: 2, want: "trainyard: no token file at /nonexistent/token"},
		"job too big":           {args: []string{"submit", "--gpus-per-worker", "1", "--", "true"}, code: 2, want: "trainyard: submit the job: the job can never run on this machine"},
		"no server":             {args: []string{"list", "--address", "127.0.0.1:1"}, code: 1, want: "trainyard: no trainyard server at http://127.0.0.1:1"},
		"negative tail":         {args: []string{"logs", id, "-t", "-1"}, code: 2, want: "trainyard: --tail and --rank must be 0 or more"},
		"get without an ID":     {args: []string{"get"}, code: 2, want: "trainyard: accepts 1 arg(s), received 0"},
		"top without a subject": {args: []string{"top", "gpus"}, code: 2, want: `trainyard: unknown command "gpus" for "trainyard top"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := trainyard(tc.args...)
			if code != tc.code || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("%v: exit %d, stderr %q; want exit %d and one line starting %q", tc.args, code, errOut, tc.code, tc.want)
			}
		})
	}
	code, out, _ = trainyard("stop", id)
	if code != 0 || out != "Job "+id+" stopped.\n" {
		t.Errorf("stop: exit %d, %q", code, out)
	}
	code, out, _ = trainyard("delete", id)
	if code != 0 || out != "Job "+id+" deleted.\n" {
		t.Errorf("delete: exit %d, %q", code, out)
	}
}

// A name that is both a job of the server and a local run names the server's job for logs
// and results alike, and stderr says so and how to name the local run.
func TestOneNameOneJob(t *testing.T) {
	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	storage := t.TempDir()
	local := makeRun(t, storage, "same", v1.PhaseSucceeded, time.Hour, resultLine(1, `, "loss": 0.5`))
	if code, out, errOut := trainyard("submit", "--no-wait", "--name", "same", "--", "true"); code != 0 {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errOut)
	}
	for _, cmd := range []string{"logs", "results"} {
		code, out, errOut := trainyard(cmd, "same", "--storage-path", storage)
		want := "trainyard: same is a job of the server at " + addr + " and a local run in " + storage +
			"; showing the server's job (the local run: give its folder, " + local + ")"
		if code != 0 || !strings.Contains(errOut, want) || strings.Contains(out, "0.5") {
			t.Errorf("%s same: exit %d, stdout %q, stderr %q; want the server's job and %q", cmd, code, out, errOut, want)
		}
	}
	if code, out, _ := trainyard("results", local); code != 0 || !strings.Contains(out, "0.5") {
		t.Errorf("results %s: exit %d\n%s", local, code, out)
	}
}
