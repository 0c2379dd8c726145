package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// fakeTensorBoard puts first on PATH a tensorboard that prints its arguments, one a line,
// and exits with code.
func fakeTensorBoard(t *testing.T, code int) {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\nfor a in \"$@\"; do echo \"arg: $a\"; done\necho 'fake tensorboard on stderr' >&2\nexit " +
		strconv.Itoa(code) + "\n"
	if err := os.WriteFile(filepath.Join(bin, "tensorboard"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// noTensorBoard leaves on PATH only a folder without tensorboard.
func noTensorBoard(t *testing.T) {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
}

// argLines is what the fake tensorboard prints for args.
func argLines(args ...string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString("arg: " + a + "\n")
	}
	return b.String()
}

func TestTensorBoard(t *testing.T) {
	storage := t.TempDir()
	run := makeRun(t, storage, "fashion-mnist", v1.PhaseSucceeded, time.Hour)
	if err := os.WriteFile(filepath.Join(run, "events.out.tfevents.1740826800.host.42.1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := makeRun(t, storage, "no-reports", v1.PhaseRunning, time.Minute)
	own := filepath.Join(t.TempDir(), "tb")
	if err := os.MkdirAll(filepath.Join(own, "lr-0.1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "lr-0.1", "events.out.tfevents.1.x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bare := t.TempDir()
	fakeTensorBoard(t, 0)

	cases := map[string]struct {
		args    []string
		wantOut string
		wantErr string
	}{
		"a run by name": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist"},
			wantOut: "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + run + "\n" +
				argLines("--logdir", run, "--port", "6006", "--host", "127.0.0.1"),
			wantErr: "fake tensorboard on stderr\n",
		},
		"a run by path, another port and host": {
			args: []string{"tensorboard", run, "--port", "6007", "--host", "::1"},
			wantOut: "trainyard: TensorBoard on http://[::1]:6007 reads " + run + "\n" +
				argLines("--logdir", run, "--port", "6007", "--host", "::1"),
			wantErr: "fake tensorboard on stderr\n",
		},
		"--logdir: the script's own SummaryWriter folder": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist", "--logdir", own},
			wantOut: "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + own + "\n" +
				argLines("--logdir", own, "--port", "6006", "--host", "127.0.0.1"),
			wantErr: "fake tensorboard on stderr\n",
		},
		"--logdir: event files in a subfolder (a TensorBoard run) are enough": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist", "--logdir", filepath.Dir(own)},
			wantOut: "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + filepath.Dir(own) + "\n" +
				argLines("--logdir", filepath.Dir(own), "--port", "6006", "--host", "127.0.0.1"),
			wantErr: "fake tensorboard on stderr\n",
		},
		"--logdir without event files yet: a warning": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist", "--logdir", bare},
			wantOut: "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + bare + "\n" +
				argLines("--logdir", bare, "--port", "6006", "--host", "127.0.0.1"),
			wantErr: "trainyard: warning: no TensorBoard event files (events.out.tfevents.*) in " + bare +
				" yet\nfake tensorboard on stderr\n",
		},
		"--logdir that does not exist yet": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist", "--logdir", own + "-later"},
			wantOut: "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + own + "-later\n" +
				argLines("--logdir", own+"-later", "--port", "6006", "--host", "127.0.0.1"),
			wantErr: "trainyard: warning: " + own + "-later does not exist yet; TensorBoard shows nothing until " +
				"something writes event files there\nfake tensorboard on stderr\n",
		},
		"no event files yet: a warning, and TensorBoard all the same": {
			args: []string{"tensorboard", "--storage-path", storage, "no-reports"},
			wantOut: "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + empty + "\n" +
				argLines("--logdir", empty, "--port", "6006", "--host", "127.0.0.1"),
			wantErr: "trainyard: warning: no TensorBoard event files (events.out.tfevents.*) in " + empty +
				" yet; they appear with the run's first trainyard.report()\nfake tensorboard on stderr\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := trainyard(tc.args...)
			if code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			if diff := cmp.Diff(tc.wantOut, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErr, errOut); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TensorBoard's exit code is trainyard's.
func TestTensorBoardExitCode(t *testing.T) {
	storage := t.TempDir()
	makeRun(t, storage, "fashion-mnist", v1.PhaseSucceeded, time.Hour)
	fakeTensorBoard(t, 3)
	code, _, errOut := trainyard("tensorboard", "--storage-path", storage, "fashion-mnist")
	if code != 3 || !strings.HasSuffix(errOut, "tensorboard exited with code 3\n") {
		t.Errorf("exit %d, stderr %q; want exit 3 and stderr ending 'tensorboard exited with code 3'", code, errOut)
	}
}

// Bad input exits 2 with a message that says what to do, and starts no TensorBoard.
func TestTensorBoardBadInput(t *testing.T) {
	storage := t.TempDir()
	run := makeRun(t, storage, "fashion-mnist", v1.PhaseSucceeded, time.Hour)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args        []string
		tensorboard bool
		want        string // stderr
	}{
		"no tensorboard on PATH": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist"},
			want: "trainyard: tensorboard is not on PATH: install it with 'pip install tensorboard' (in a virtual " +
				"environment, or 'pipx install tensorboard'), then run this again; the run's event files are in " + run + "\n",
		},
		"an unknown run": {
			args: []string{"tensorboard", "--storage-path", storage, "nope"}, tensorboard: true,
			want: "trainyard: no run nope in " + storage + " (run.json not found); give a run name or the path of a " +
				"run's folder; 'trainyard results --storage-path " + storage + "' lists the runs\n",
		},
		"an unknown run, no tensorboard either": {
			args: []string{"tensorboard", "--storage-path", storage, "nope"},
			want: "trainyard: no run nope in " + storage + " (run.json not found); give a run name or the path of a " +
				"run's folder; 'trainyard results --storage-path " + storage + "' lists the runs\n",
		},
		"a --logdir that is a file": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist", "--logdir", notDir}, tensorboard: true,
			want: "trainyard: --logdir " + notDir + " is not a folder: give the folder that holds the events.out.tfevents.* files\n",
		},
		"a port out of range": {
			args: []string{"tensorboard", "--storage-path", storage, "fashion-mnist", "--port", "70000"}, tensorboard: true,
			want: "trainyard: --port 70000: give a port from 1 to 65535\n",
		},
		"no RUN": {
			args: []string{"tensorboard"}, tensorboard: true,
			want: "trainyard: accepts 1 arg(s), received 0\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.tensorboard {
				fakeTensorBoard(t, 0)
			} else {
				noTensorBoard(t)
			}
			code, out, errOut := trainyard(tc.args...)
			if code != ExitUsage || out != "" {
				t.Errorf("exit %d, stdout %q; want exit 2 and no stdout", code, out)
			}
			if diff := cmp.Diff(tc.want, errOut); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// The default storage path is ~/trainyard_results, a path may start with ~/, and the
// hint to list runs is plain 'trainyard results' there.
func TestTensorBoardDefaultStorage(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	run := makeRun(t, filepath.Join(home, "trainyard_results"), "fashion-mnist", v1.PhaseSucceeded, time.Hour)
	fakeTensorBoard(t, 0)
	for _, arg := range []string{"fashion-mnist", "~/trainyard_results/fashion-mnist"} {
		code, out, _ := trainyard("tensorboard", arg)
		if want := "trainyard: TensorBoard on http://127.0.0.1:6006 reads " + run + "\n"; code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("%s: exit %d, stdout %q; want exit 0 and stdout starting %q", arg, code, out, want)
		}
	}
	code, _, errOut := trainyard("tensorboard", "nope")
	if want := "; 'trainyard results' lists the runs\n"; code != ExitUsage || !strings.HasSuffix(errOut, want) {
		t.Errorf("exit %d, stderr %q; want exit 2 and stderr ending %q", code, errOut, want)
	}
}

// A Ctrl-C (or SIGTERM) reaches TensorBoard once, forwarded by trainyard, which then exits
// with TensorBoard's code; a second one kills it.
func TestTensorBoardForwardsSignals(t *testing.T) {
	storage := t.TempDir()
	makeRun(t, storage, "fashion-mnist", v1.PhaseRunning, time.Hour)
	cases := map[string]struct {
		trap    string // what the fake tensorboard does on SIGINT and SIGTERM
		signals []syscall.Signal
		code    int
		got     string // the signals it saw
	}{
		"Ctrl-C, and TensorBoard exits 0": {trap: "exit 0", signals: []syscall.Signal{syscall.SIGINT}, code: 0, got: "INT\n"},
		"SIGTERM":                         {trap: "exit 0", signals: []syscall.Signal{syscall.SIGTERM}, code: 0, got: "TERM\n"},
		"TensorBoard's own code":          {trap: "exit 5", signals: []syscall.Signal{syscall.SIGINT}, code: 5, got: "INT\n"},
		"a second Ctrl-C kills it":        {trap: ":", signals: []syscall.Signal{syscall.SIGINT, syscall.SIGINT}, code: 128 + 9, got: "INT\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bin, seen := t.TempDir(), filepath.Join(t.TempDir(), "seen")
			script := fmt.Sprintf(`#!/bin/sh
trap 'echo INT >>%[1]s; %[2]s' INT
trap 'echo TERM >>%[1]s; %[2]s' TERM
: >%[1]s
while :; do sleep 0.05; done
`, seen, tc.trap)
			if err := os.WriteFile(filepath.Join(bin, "tensorboard"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			exited := make(chan int, 1)
			go func() {
				code, _, _ := trainyard("tensorboard", "--storage-path", storage, "fashion-mnist")
				exited <- code
			}()
			for i, sig := range tc.signals {
				waitFor(t, func() bool {
					data, err := os.ReadFile(seen)
					return err == nil && strings.Count(string(data), "\n") == i
				})
				if err := syscall.Kill(os.Getpid(), sig); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case code := <-exited:
				if code != tc.code {
					t.Errorf("exit %d, want %d", code, tc.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("trainyard tensorboard did not exit")
			}
			if data, _ := os.ReadFile(seen); string(data) != tc.got {
				t.Errorf("tensorboard saw %q, want %q", data, tc.got)
			}
		})
	}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
