package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSMI puts a stand-in nvidia-smi that reports four H100s first on PATH, and returns
// the environment to run trainyard with. This machine has no GPU; the real thing is
// checked on a GPU machine (see the closing notes of the GPU issue).
func fakeSMI(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "nvidia-smi"), `#!/bin/sh
cat <<'ROWS'
0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15
1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15
2, GPU-22222222-2222-2222-2222-222222222222, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15
3, GPU-33333333-3333-3333-3333-333333333333, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15
ROWS
`)
	return []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
}

func TestDevicesCommand(t *testing.T) {
	code, out := run(t, t.TempDir(), fakeSMI(t), "devices")
	if code != 0 || !strings.Contains(out, "4 GPU(s), driver 570.86.15") || !strings.Contains(out, "NVIDIA H100 80GB HBM3") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	code, out = run(t, t.TempDir(), []string{"PATH=/usr/bin:/bin"}, "devices")
	if code != 0 || !strings.Contains(out, "No GPUs") {
		t.Errorf("without a driver: exit %d, output:\n%s", code, out)
	}
}

// Each worker gets its own GPUs; GPUs the launcher was not given are never used.
func TestGPUAssignment(t *testing.T) {
	show := []string{"--", "sh", "-c", `echo "worker $GROUP_RANK local $LOCAL_RANK sees [$CUDA_VISIBLE_DEVICES]"`}
	cases := map[string]struct {
		env  []string
		args []string
		want []string
	}{
		"two workers, two GPUs each": {
			args: []string{"--workers", "2", "--gpus-per-worker", "2"},
			want: []string{"worker 0 local 0 sees [0,1]", "worker 0 local 1 sees [0,1]", "worker 1 local 0 sees [2,3]", "worker 1 local 1 sees [2,3]"},
		},
		"restricted by CUDA_VISIBLE_DEVICES": {
			env:  []string{"CUDA_VISIBLE_DEVICES=1,3"},
			args: []string{"--workers", "2", "--gpus-per-worker", "1"},
			want: []string{"worker 0 local 0 sees [1]", "worker 1 local 0 sees [3]"},
		},
		"worker without GPU": {
			args: []string{"--workers", "1"},
			want: []string{"worker 0 local 0 sees []"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := append(fakeSMI(t), tc.env...)
			args := append(append([]string{"run", "--storage-path", t.TempDir()}, tc.args...), show...)
			code, out := run(t, t.TempDir(), env, args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	code, out := run(t, t.TempDir(), fakeSMI(t), "run", "--workers", "3", "--gpus-per-worker", "2", "--", "true")
	if code != 2 || !strings.Contains(out, "needs 6 GPUs (3 workers x 2 GPUs) but this machine has 4") {
		t.Errorf("too many GPUs: exit %d, output:\n%s", code, out)
	}
}
