package device

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAssign(t *testing.T) {
	cases := map[string]struct {
		inv           Inventory
		workers, each int
		want          [][]GPU
	}{
		"exact fit": {
			inv: h100Inventory(), workers: 2, each: 2,
			want: [][]GPU{h100s(0, 1), h100s(2, 3)},
		},
		"one GPU each": {
			inv: h100Inventory(), workers: 4, each: 1,
			want: [][]GPU{h100s(0), h100s(1), h100s(2), h100s(3)},
		},
		"fewer than available": {
			inv: h100Inventory(), workers: 1, each: 3,
			want: [][]GPU{h100s(0, 1, 2)},
		},
		"index order even if inventory is not": {
			inv:     Inventory{GPUs: h100s(3, 1, 0, 2), Source: sourceNVML},
			workers: 2, each: 2,
			want: [][]GPU{h100s(0, 1), h100s(2, 3)},
		},
		"restricted inventory": {
			inv:     Inventory{GPUs: h100s(1, 3), Source: sourceNVML},
			workers: 2, each: 1,
			want: [][]GPU{h100s(1), h100s(3)},
		},
		"zero GPUs per worker": {
			inv: h100Inventory(), workers: 3, each: 0,
			want: [][]GPU{{}, {}, {}},
		},
		"zero GPUs per worker without a driver": {
			inv: none("no NVIDIA driver: nvidia-smi not found in PATH"), workers: 2, each: 0,
			want: [][]GPU{{}, {}},
		},
		"zero workers": {
			inv: h100Inventory(), workers: 0, each: 8,
			want: [][]GPU{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Assign(tc.inv, tc.workers, tc.each)
			if err != nil {
				t.Fatalf("Assign(%d, %d): %v", tc.workers, tc.each, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Assign(%d, %d) (-want +got):\n%s", tc.workers, tc.each, diff)
			}
		})
	}
}

func TestAssignDisjoint(t *testing.T) {
	inv := Inventory{GPUs: h100s(3, 2, 1, 0), Source: sourceNVML}
	got, err := Assign(inv, 2, 2)
	if err != nil {
		t.Fatalf("Assign: %v", err)
	}
	seen := map[int]int{} // GPU index -> worker
	for w, gpus := range got {
		for _, g := range gpus {
			if prev, dup := seen[g.Index]; dup {
				t.Errorf("GPU %d given to workers %d and %d", g.Index, prev, w)
			}
			seen[g.Index] = w
		}
	}
	// Changing one worker's slice must not change the inventory or another worker's.
	got[0][0].Index = 99
	if inv.GPUs[3].Index != 0 || got[1][0].Index != 2 {
		t.Errorf("worker slices share memory with the inventory or each other")
	}
}

func TestAssignNotEnough(t *testing.T) {
	cases := map[string]struct {
		inv           Inventory
		workers, each int
		want          NotEnoughGPUsError
		wantMsg       string
	}{
		"too many": {
			inv: Inventory{GPUs: h100s(0), Source: sourceNVML}, workers: 2, each: 2,
			want: NotEnoughGPUsError{
				Requested: 4, Available: 1, Source: sourceNVML, Workers: 2, GPUsPerWorker: 2,
			},
			wantMsg: "the job needs 4 GPUs (2 workers x 2 GPUs) but this machine has 1 (nvidia-smi (NVML))",
		},
		"one over": {
			inv: h100Inventory(), workers: 5, each: 1,
			want: NotEnoughGPUsError{
				Requested: 5, Available: 4, Source: sourceNVML, Workers: 5, GPUsPerWorker: 1,
			},
			wantMsg: "the job needs 5 GPUs (5 workers x 1 GPU) but this machine has 4 (nvidia-smi (NVML))",
		},
		"no driver": {
			inv: none("no NVIDIA driver: nvidia-smi not found in PATH"), workers: 1, each: 1,
			want: NotEnoughGPUsError{
				Requested: 1, Available: 0, Workers: 1, GPUsPerWorker: 1,
				Source: "none: no NVIDIA driver: nvidia-smi not found in PATH",
			},
			wantMsg: "the job needs 1 GPU (1 worker x 1 GPU) but this machine has none: " +
				"no NVIDIA driver: nvidia-smi not found in PATH",
		},
		"no source": {
			inv: Inventory{}, workers: 2, each: 1,
			want: NotEnoughGPUsError{
				Requested: 2, Available: 0, Workers: 2, GPUsPerWorker: 1,
			},
			wantMsg: "the job needs 2 GPUs (2 workers x 1 GPU) but this machine has 0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Assign(tc.inv, tc.workers, tc.each)
			var got *NotEnoughGPUsError
			if !errors.As(err, &got) {
				t.Fatalf("Assign(%d, %d) error = %v, want a *NotEnoughGPUsError", tc.workers, tc.each, err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAssignInvalid(t *testing.T) {
	cases := map[string]struct {
		workers, each int
		wantErr       string
	}{
		"negative workers":         {workers: -1, each: 1, wantErr: "must not be negative"},
		"negative GPUs per worker": {workers: 1, each: -2, wantErr: "must not be negative"},
		"overflow":                 {workers: math.MaxInt, each: 2, wantErr: "too many"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Assign(h100Inventory(), tc.workers, tc.each)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Assign(%d, %d) = %v, %v; want an error containing %q",
					tc.workers, tc.each, got, err, tc.wantErr)
			}
		})
	}
}
