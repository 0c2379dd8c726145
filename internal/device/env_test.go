package device

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnv(t *testing.T) {
	cases := map[string]struct {
		gpus []GPU
		want map[string]string
	}{
		"no GPU (nil)": {
			gpus: nil,
			want: map[string]string{"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"},
		},
		"no GPU (empty)": {
			gpus: []GPU{},
			want: map[string]string{"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"},
		},
		"one GPU": {
			gpus: h100s(2),
			want: map[string]string{"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
		"several GPUs": {
			gpus: h100s(1, 3),
			want: map[string]string{"CUDA_VISIBLE_DEVICES": "1,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Env(tc.gpus)); diff != "" {
				t.Errorf("Env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvOfAssignment(t *testing.T) {
	workers, err := Assign(h100Inventory(), 2, 2)
	if err != nil {
		t.Fatalf("Assign: %v", err)
	}
	var got []string
	for _, gpus := range workers {
		got = append(got, Env(gpus)["CUDA_VISIBLE_DEVICES"])
	}
	if diff := cmp.Diff([]string{"0,1", "2,3"}, got); diff != "" {
		t.Errorf("CUDA_VISIBLE_DEVICES per worker (-want +got):\n%s", diff)
	}
}
