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

// Each worker gets its own GPUs, and GPUs the launcher was not given are never used. On
// one machine the gang is one torchrun node: every process sees the gang's GPUs, in
// worker order, local ranks count the gang's processes, and TRAINYARD_CUDA_DEVICE names
// the process's own GPU, which with one GPU per process is cuda:LOCAL_RANK (torchrun's
// torch.cuda.set_device(LOCAL_RANK), and Ray's devices).
func TestGPUAssignment(t *testing.T) {
	show := []string{"--", "sh", "-c", `echo "rank $RANK worker $TRAINYARD_WORKER node $NODE_RANK local $LOCAL_RANK of $LOCAL_WORLD_SIZE sees [$CUDA_VISIBLE_DEVICES] own ${TRAINYARD_CUDA_DEVICE:-none}"`}
	cases := map[string]struct {
		env      []string
		args     []string
		want     []string
		recorded []string // each rank's GPUs in run.json (what get and top show): its worker's own
	}{
		"two workers, two GPUs each": {
			args: []string{"--workers", "2", "--gpus-per-worker", "2", "--procs-per-worker", "2"},
			want: []string{"rank 0 worker 0 node 0 local 0 of 4 sees [0,1,2,3] own 0", "rank 1 worker 0 node 0 local 1 of 4 sees [0,1,2,3] own 1",
				"rank 2 worker 1 node 0 local 2 of 4 sees [0,1,2,3] own 2", "rank 3 worker 1 node 0 local 3 of 4 sees [0,1,2,3] own 3"},
			recorded: []string{"0,1", "0,1", "2,3", "2,3"},
		},
		"restricted by CUDA_VISIBLE_DEVICES": {
			env:  []string{"CUDA_VISIBLE_DEVICES=1,3"},
			args: []string{"--workers", "2", "--gpus-per-worker", "1"},
			want: []string{"rank 0 worker 0 node 0 local 0 of 2 sees [1,3] own 0", "rank 1 worker 1 node 0 local 1 of 2 sees [1,3] own 1"},
		},
		"one process with two GPUs per worker": {
			args: []string{"--workers", "2", "--gpus-per-worker", "2", "--procs-per-worker", "1"},
			want: []string{"rank 0 worker 0 node 0 local 0 of 2 sees [0,1,2,3] own 0", "rank 1 worker 1 node 0 local 1 of 2 sees [0,1,2,3] own 2"},
		},
		"worker without GPU": {
			args: []string{"--workers", "1"},
			want: []string{"rank 0 worker 0 node 0 local 0 of 1 sees [] own none"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := append(fakeSMI(t), tc.env...)
			storage := t.TempDir()
			args := append(append([]string{"run", "--storage-path", storage, "--name", "g"}, tc.args...), show...)
			code, out := run(t, t.TempDir(), env, args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tc.recorded != nil {
				var got []string
				for _, r := range readRecord(t, filepath.Join(storage, "g")).Attempts[0].Ranks {
					got = append(got, r.GPUs)
				}
				if strings.Join(got, " ") != strings.Join(tc.recorded, " ") {
					t.Errorf("run.json's GPUs per rank: %q, want %q", got, tc.recorded)
				}
			}
		})
	}
	code, out := run(t, t.TempDir(), fakeSMI(t), "run", "--workers", "3", "--gpus-per-worker", "2", "--", "true")
	if code != 2 || !strings.Contains(out, "needs 6 GPUs (3 workers x 2 GPUs) but this machine has 4") {
		t.Errorf("too many GPUs: exit %d, output:\n%s", code, out)
	}
}
