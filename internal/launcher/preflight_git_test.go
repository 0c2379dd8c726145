package launcher

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// With a git source whose workers start in the run folder, a relative script must lead
// into the clone (code/<repo>/): else it is refused before anything is made, naming the
// path that would work. The clone's content is checked once it is cloned (FetchSource);
// an explicit working folder, absolute paths, -m and -c are left alone.
func TestCheckScriptEarlyGitSource(t *testing.T) {
	storage := filepath.Join(t.TempDir(), "runs")
	runDir := filepath.Join(storage, "arena")
	cases := map[string]struct {
		command []string
		workdir string
		want    string // "" for no error
	}{
		"a script from where the user is": {command: []string{"python3", "ddp.py"},
			want: "script ddp.py (run by python3) is not in the run folder " + runDir +
				", where the workers start; with --sync-source the code is at code/mnist-pytorch/ddp.py: give code/mnist-pytorch/ddp.py"},
		"a script in the clone":      {command: []string{"python3", "code/mnist-pytorch/ddp.py"}},
		"the same, with ./":          {command: []string{"python3", "./code/mnist-pytorch/ddp.py"}},
		"an absolute path":           {command: []string{"python3", "/opt/ddp.py"}},
		"-m":                         {command: []string{"python3", "-m", "ddp"}},
		"-c":                         {command: []string{"python3", "-c", "print(1)"}},
		"another program":            {command: []string{"sh", "ddp.py"}},
		"an explicit working folder": {command: []string{"python3", "ddp.py"}, workdir: t.TempDir()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: tc.command, WorkingDir: tc.workdir, StoragePath: storage, RunName: "arena",
				Source: &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/team/mnist-pytorch.git"}}}}
			if err := jobspec.Default(job, jobspec.Env{}); err != nil {
				t.Fatal(err)
			}
			err := CheckScriptEarly(job)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckScriptEarly: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("CheckScriptEarly: %v, want %q", err, tc.want)
			}
		})
	}
}
