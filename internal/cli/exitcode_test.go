package cli

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/kubecli"
)

// Every command exits 2 for bad input, whether trainyard finds it or the server refuses
// it, and 1 for a failure (a job not found, no server); nothing bad-input is created.
func TestExitCodes(t *testing.T) {
	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	dir := t.TempDir()
	storage := filepath.Join(dir, "runs")
	cases := map[string]struct {
		args []string
		code int
		want string // what stderr starts with
	}{
		"submit: a job that can never fit": {args: []string{"submit", "--gpus-per-worker", "1", "--", "true"}, code: 2,
			want: "trainyard: submit the job: the job can never run on this machine: the job needs 1 GPU (1 worker x 1) but this machine has 0"},
		"submit: an ID that is no name": {args: []string{"submit", "--id", "a/b", "--", "true"}, code: 2,
			want: `trainyard: --id "a/b": ` + jobspec.NameRule},
		"submit: an empty ID": {args: []string{"submit", "--id", "", "--", "true"}, code: 2,
			want: `trainyard: --id "": ` + jobspec.NameRule},
		"submit: a name that is no name": {args: []string{"submit", "--name", "My_Job", "--", "true"}, code: 2,
			want: `trainyard: invalid job: --name (metadata.name): Invalid value: "My_Job": ` + jobspec.NameRule},
		"submit: an empty name": {args: []string{"submit", "--name", "", "--", "true"}, code: 2,
			want: `trainyard: --name "": ` + jobspec.NameRule},
		"submit: --working-dir and --workdir": {args: []string{"submit", "--working-dir", dir, "--workdir", dir, "--", "true"}, code: 2,
			want: "trainyard: --working-dir and --workdir " + dir + " both say where the workers start"},
		"submit: --working-dir that does not exist": {args: []string{"submit", "--working-dir", filepath.Join(dir, "nope"), "--", "true"}, code: 2,
			want: "trainyard: --working-dir: "},
		"list: an unknown status":   {args: []string{"list", "--status", "bogus"}, code: 2, want: `trainyard: status "BOGUS": use PENDING`},
		"list: an argument":         {args: []string{"list", "x"}, code: 2, want: `trainyard: unknown command "x" for "trainyard list"`},
		"get: an unknown job":       {args: []string{"get", "nope"}, code: 1},
		"stop: an unknown job":      {args: []string{"stop", "nope"}, code: 1},
		"delete: an unknown job":    {args: []string{"delete", "nope"}, code: 1},
		"logs: an unknown job":      {args: []string{"logs", "nope"}, code: 1},
		"list: no server":           {args: []string{"list", "--address", "http://127.0.0.1:1"}, code: 1},
		"run: a name that is none":  {args: []string{"run", "--storage-path", storage, "--name", "a.b", "--", "true"}, code: 2},
		"run: an empty name":        {args: []string{"run", "--storage-path", storage, "--name", "", "--", "true"}, code: 2},
		"run: submit's working-dir": {args: []string{"run", "--working-dir", ".", "--", "true"}, code: 2, want: "trainyard: unknown flag: --working-dir; run starts the workers in --workdir"},
		"results: an unknown run":   {args: []string{"results", "--storage-path", storage, "nope"}, code: 1, want: "trainyard: no run nope in " + storage},
		"results: two runs":         {args: []string{"results", "a", "b"}, code: 2},
		"devices: a bad -o":         {args: []string{"devices", "-o", "xml"}, code: 2},
		"version: a bad -o":         {args: []string{"version", "-o", "xml"}, code: 2},
		"version: an argument":      {args: []string{"version", "x"}, code: 2},
		"an unknown command":        {args: []string{"nope"}, code: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := trainyard(tc.args...)
			if code != tc.code || !strings.HasPrefix(errOut, tc.want) {
				t.Errorf("%q: exit %d, stderr %q; want exit %d and stderr starting %q", tc.args, code, errOut, tc.code, tc.want)
			}
		})
	}
	if code, out, _ := trainyard("list", "-o", "json"); code != 0 || out != "[]\n" {
		t.Errorf("bad input created jobs: list -o json: exit %d:\n%s", code, out)
	}
	if matches, _ := filepath.Glob(filepath.Join(storage, "*")); len(matches) > 0 {
		t.Errorf("bad input created run folders: %v", matches)
	}
}

func TestExitCodeOf(t *testing.T) {
	cases := map[string]struct {
		err  error
		want int
	}{
		"cobra's own error":           {err: errors.New(`unknown command "x"`), want: ExitUsage},
		"bad input":                   {err: usageError(errors.New("bad")), want: ExitUsage},
		"a failure":                   {err: &exitError{code: ExitFailed, err: errors.New("failed")}, want: ExitFailed},
		"interrupted":                 {err: &exitError{code: ExitInterrupted, err: errors.New("stopped")}, want: ExitInterrupted},
		"server: 400, made a failure": {err: &exitError{code: ExitFailed, err: apiError(http.StatusBadRequest)}, want: ExitUsage},
		"server: 422":                 {err: &exitError{code: ExitFailed, err: apiError(http.StatusUnprocessableEntity)}, want: ExitUsage},
		"server: 413":                 {err: &exitError{code: ExitFailed, err: apiError(http.StatusRequestEntityTooLarge)}, want: ExitUsage},
		"server: 404":                 {err: &exitError{code: ExitFailed, err: apiError(http.StatusNotFound)}, want: ExitFailed},
		"server: 409":                 {err: &exitError{code: ExitFailed, err: apiError(http.StatusConflict)}, want: ExitFailed},
		"server: 401":                 {err: &exitError{code: ExitFailed, err: apiError(http.StatusUnauthorized)}, want: ExitFailed},
		"server: 500":                 {err: &exitError{code: ExitFailed, err: apiError(http.StatusInternalServerError)}, want: ExitFailed},
		"cluster: invalid":            {err: &exitError{code: ExitFailed, err: &kubecli.InputError{Err: errors.New("invalid")}}, want: ExitUsage},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func apiError(status int) error {
	return fmt.Errorf("submit job x: %w", &client.APIError{Status: status, Message: http.StatusText(status)})
}
