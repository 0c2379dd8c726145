package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bad input gets one clear message and exit code 2, before any worker starts, and leaves
// nothing behind in the storage path.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	badJob := filepath.Join(dir, "bad.yaml")
	writeFile(t, badJob, "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  workers: 2\n  comand: [python3]\n")
	noPath := []string{"PATH=/usr/bin:/bin"} // no nvidia-smi: this machine has no GPU
	cases := map[string]struct {
		args []string
		env  []string
		want string
	}{
		"unknown flag":      {args: []string{"--wrokers", "2", "--", "true"}, want: "unknown flag: --wrokers"},
		"zero workers":      {args: []string{"--workers", "0", "--", "true"}, want: "--workers (spec.workers): Invalid value: 0: must be between 1 and 10000"},
		"negative workers":  {args: []string{"--workers", "-1", "--", "true"}, want: "--workers (spec.workers): Invalid value: -1"},
		"missing command":   {args: []string{"--workers", "2"}, want: "the command after -- (spec.command): Required value"},
		"command not found": {args: []string{"--", "no-such-program"}, want: `command "no-such-program": not found in PATH`},
		"script not found":  {args: []string{"--", "./missing.sh"}, want: "missing.sh does not exist"},
		"python script not found": {args: []string{"--", "python3", "-u", "missing.py"},
			want: "script missing.py (run by python3) does not exist in the working folder " + dir},
		"a name that is none": {args: []string{"--name", "My_Run", "--", "true"},
			want: `--name (metadata.name): Invalid value: "My_Run": a name is 1 to 45 characters`},
		"an empty name":        {args: []string{"--name", "", "--", "true"}, want: `--name "": a name is 1 to 45 characters`},
		"job file missing":     {args: []string{"-f", "nope.yaml"}, want: "read job file: open nope.yaml: no such file or directory"},
		"job file bad field":   {args: []string{"-f", badJob}, want: `unknown field "spec.comand"`},
		"more GPUs than exist": {args: []string{"--workers", "2", "--gpus-per-worker", "1", "--", "true"}, env: noPath, want: "the job needs 2 GPUs (2 workers x 1 GPU) but this machine has none"},
		"storage not a folder": {args: []string{"--storage-path", "/etc/passwd/runs", "--", "true"}, want: "storage path (--storage-path) /etc/passwd/runs: /etc/passwd is not a folder"},
		"bad env flag":         {args: []string{"--env", "NOVALUE", "--", "true"}, want: `--env "NOVALUE": must be KEY=VALUE`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			storage := filepath.Join(t.TempDir(), "results")
			args := append([]string{"run", "--storage-path", storage}, tc.args...)
			code, out := run(t, dir, tc.env, args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
			if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 {
				t.Errorf("want one line of output, got %d:\n%s", lines, out)
			}
			if _, err := os.Stat(storage); !os.IsNotExist(err) {
				t.Errorf("the storage path was created (%v); bad input must leave nothing behind", err)
			}
		})
	}
}

// A finished run is not overwritten by another run of the same name.
func TestFinishedRunNotOverwritten(t *testing.T) {
	dir := t.TempDir()
	storage := filepath.Join(dir, "results")
	if code, out := run(t, dir, nil, "run", "--storage-path", storage, "--name", "once", "--", "true"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	code, out := run(t, dir, nil, "run", "--storage-path", storage, "--name", "once", "--", "true")
	if code != 2 || !strings.Contains(out, "run already finished") {
		t.Errorf("second run: exit %d, output:\n%s\nwant exit 2 saying the run already finished", code, out)
	}
	if rec := readRecord(t, filepath.Join(storage, "once")); len(rec.Attempts) != 1 {
		t.Errorf("the finished run's record changed: %d attempts", len(rec.Attempts))
	}
}

// results lists the runs of a storage path, and -o json of none is [].
func TestResultsListing(t *testing.T) {
	dir := t.TempDir()
	storage := filepath.Join(dir, "results")
	if code, out := run(t, dir, nil, "results", "--storage-path", storage, "-o", "json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("results of no runs: exit %d, output:\n%s", code, out)
	}
	for _, name := range []string{"first", "second"} {
		if code, out := run(t, dir, nil, "run", "--storage-path", storage, "--name", name, "--", "true"); code != 0 {
			t.Fatalf("run %s: exit %d\n%s", name, code, out)
		}
	}
	code, out := run(t, dir, nil, "results", "--storage-path", storage)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.HasPrefix(lines[1], "first ") || !strings.Contains(lines[2], "Succeeded") {
		t.Errorf("results: exit %d, output:\n%s", code, out)
	}
}

// SIGTERM (or Ctrl-C) stops the gang cleanly and trainyard exits 130.
func TestSignalStopsGang(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			storage := filepath.Join(dir, "results")
			ty := start(t, dir, nil, "run", "--storage-path", storage, "--name", "sig", "--workers", "2",
				"--", "sh", "-c", "echo ready; exec sleep 300")
			ty.out.waitFor(t, "ready", 30*time.Second)
			began := time.Now()
			if err := ty.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := ty.wait(t)
			if code != 130 {
				t.Errorf("exit code %d, want 130; output:\n%s", code, ty.out)
			}
			if took := time.Since(began); took > 20*time.Second {
				t.Errorf("stopping took %s", took)
			}
			rec := readRecord(t, filepath.Join(storage, "sig"))
			if rec.Phase != "Interrupted" {
				t.Errorf("phase %s, want Interrupted", rec.Phase)
			}
			for _, r := range rec.Attempts[0].Ranks {
				if err := syscall.Kill(-r.PID, 0); err != syscall.ESRCH {
					t.Errorf("rank %d's process group %d survived (%v)", r.Rank, r.PID, err)
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}
