package jobspec

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden with the messages Load returns")

// validJob is what testdata/valid.yaml holds.
func validJob() *v1.TrainJob {
	return typeMeta(v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "resnet-imagenet", Labels: map[string]string{"team": "vision"}},
		Spec: v1.TrainJobSpec{
			Workers:                       ptr(int32(2)),
			ProcsPerWorker:                ptr(int32(4)),
			Resources:                     v1.WorkerResources{CPU: quantity("16"), Memory: quantity("64Gi"), GPU: 4},
			Command:                       []string{"/usr/bin/python3", "-u"},
			Args:                          []string{"train.py", "--epochs", "90"},
			Env:                           []v1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "EMPTY"}},
			WorkingDir:                    "/srv/resnet",
			StoragePath:                   "/data/runs",
			RunName:                       "resnet-try-1",
			MaxRestarts:                   3,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			ProcessGroupTimeoutSeconds:    ptr(int64(120)),
			HangTimeoutSeconds:            600,
			ResizeIntervalSeconds:         ptr(int64(300)),
			Checkpoints:                   v1.CheckpointPolicy{Keep: 3, ScoreMetric: "accuracy", ScoreOrder: "max"},
		},
	})
}

func TestLoadDecodesEveryField(t *testing.T) {
	cases := map[string]struct {
		path string
		want *v1.TrainJob
	}{
		"YAML": {path: "testdata/valid.yaml", want: validJob()},
		"JSON": {path: "testdata/valid.json", want: validJob()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Load(tc.path)
			if err != nil {
				t.Fatalf("Load(%q): %v", tc.path, err)
			}
			if diff := cmp.Diff(tc.want, got, jobCmp); diff != "" {
				t.Errorf("Load(%q) mismatch (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestParseLeavesDefaultsToDefault(t *testing.T) {
	got, err := Parse([]byte("apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  command: [python3, train.py]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3", "train.py"}}})
	if diff := cmp.Diff(want, got, jobCmp); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

// TestLoadBadFiles runs Load on every testdata/bad/<name>.yaml and compares the error
// with testdata/bad/<name>.golden. Run with -update to rewrite the golden files.
func TestLoadBadFiles(t *testing.T) {
	inputs, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata/bad/*.yaml")
	}
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".yaml")
		golden := strings.TrimSuffix(input, ".yaml") + ".golden"
		t.Run(name, func(t *testing.T) {
			job, err := Load(input)
			if err == nil {
				t.Fatalf("Load(%q) = %+v, want an error", input, job)
			}
			if job != nil {
				t.Errorf("Load(%q) returned a job with its error: %+v", input, job)
			}
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Load(%q) error mismatch (-want +got):\n%s", input, diff)
			}
		})
	}
	t.Run("every golden file has an input", func(t *testing.T) {
		goldens, err := filepath.Glob("testdata/bad/*.golden")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range goldens {
			if _, err := os.Stat(strings.TrimSuffix(g, ".golden") + ".yaml"); err != nil {
				t.Errorf("%s has no input: %v", g, err)
			}
		}
	})
}

func TestLoadFileProblems(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	data := []byte("apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\n#")
	data = append(data, strings.Repeat("x", MaxFileSize+1-len(data)-1)...)
	data = append(data, '\n')
	if err := os.WriteFile(big, data, 0o644); err != nil {
		t.Fatal(err)
	}
	justFits := filepath.Join(dir, "fits.yaml")
	if err := os.WriteFile(justFits, data[:MaxFileSize-1], 0o644); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		path string
		want string
	}{
		"file not found": {
			path: "testdata/no-such-job.yaml",
			want: "read job file: open testdata/no-such-job.yaml: no such file or directory",
		},
		"a folder": {
			path: "testdata/bad",
			want: "read job file: testdata/bad is a folder, not a file",
		},
		"bigger than MaxFileSize": {
			path: big,
			want: fmt.Sprintf("read job file: %s is 1048577 bytes; a job file may be at most 1048576", big),
		},
		"MaxFileSize or less is read (and parsed)": {
			path: justFits,
			want: justFits + ": spec.command: Required value",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, err := Load(tc.path)
			if name == "MaxFileSize or less is read (and parsed)" {
				// A job with no spec decodes; only Validate finds it lacking.
				if err != nil {
					t.Fatalf("Load(%q): %v", tc.path, err)
				}
				if err := Validate(job); err == nil || !strings.Contains(err.Error(), "spec.command: Required value") {
					t.Errorf("Validate(job with no spec) = %v, want spec.command required", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, errString(err)); diff != "" {
				t.Errorf("Load(%q) error mismatch (-want +got):\n%s", tc.path, diff)
			}
			if job != nil {
				t.Errorf("Load(%q) returned a job with its error: %+v", tc.path, job)
			}
		})
	}
}

func TestLoadResolvesWorkingDirAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		workingDir string
		want       string
	}{
		"relative":                 {workingDir: "src", want: filepath.Join(dir, "src")},
		"dot":                      {workingDir: ".", want: dir},
		"parent":                   {workingDir: "../shared/code", want: filepath.Join(filepath.Dir(dir), "shared/code")},
		"absolute is kept":         {workingDir: "/srv/code", want: "/srv/code"},
		"home is left for Default": {workingDir: "~/code", want: "~/code"},
		"unset stays unset":        {workingDir: "", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "job.yaml")
			doc := "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  command: [python3]\n"
			if tc.workingDir != "" {
				doc += fmt.Sprintf("  workingDir: %q\n", tc.workingDir)
			}
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			job, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, job.Spec.WorkingDir); diff != "" {
				t.Errorf("workingDir mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A file named by a relative path gives a workingDir relative to the current folder,
// which Default then makes absolute against Env.WorkDir (the current folder too, unless
// a test injects another).
func TestLoadRelativePathThenDefault(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	job, err := Load("testdata/workingdir.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("testdata/src", job.Spec.WorkingDir); diff != "" {
		t.Errorf("after Load, workingDir mismatch (-want +got):\n%s", diff)
	}
	if err := Default(job, Env{WorkDir: wd, Home: "/home/ada", Now: testEnv.Now}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(filepath.Join(wd, "testdata", "src"), job.Spec.WorkingDir); diff != "" {
		t.Errorf("after Default, workingDir mismatch (-want +got):\n%s", diff)
	}
}

func TestParseQuantities(t *testing.T) {
	cases := map[string]struct {
		resources string
		want      v1.WorkerResources
	}{
		"whole cores as a number":                {resources: "cpu: 4", want: v1.WorkerResources{CPU: quantity("4")}},
		"millicores":                             {resources: "cpu: 500m", want: v1.WorkerResources{CPU: quantity("500m")}},
		"fraction of a core":                     {resources: "cpu: 0.5", want: v1.WorkerResources{CPU: quantity("500m")}},
		"binary memory units":                    {resources: "memory: 8Gi", want: v1.WorkerResources{Memory: quantity("8Gi")}},
		"quoted memory":                          {resources: `memory: "512Mi"`, want: v1.WorkerResources{Memory: quantity("512Mi")}},
		"negative decodes (Validate rejects it)": {resources: "cpu: -1", want: v1.WorkerResources{CPU: quantity("-1")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  command: [python3]\n  resources:\n    " + tc.resources + "\n"
			job, err := Parse([]byte(doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, job.Spec.Resources, jobCmp); diff != "" {
				t.Errorf("resources mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A document separator before the only document, or a comment-only document after it,
// is still one job.
func TestParseSingleDocumentWithSeparators(t *testing.T) {
	data := "---\napiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  command: [a]\n--- # end\n# nothing here\n"
	job, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(job.Spec.Command) != 1 || job.Spec.Command[0] != "a" {
		t.Errorf("command = %v, want [a]", job.Spec.Command)
	}
}
