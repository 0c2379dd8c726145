package device

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVisible(t *testing.T) {
	restricted := func(value string, indices ...int) Inventory {
		return Inventory{
			GPUs:          h100s(indices...),
			DriverVersion: "550.54.15",
			Source:        "nvidia-smi (NVML), restricted by CUDA_VISIBLE_DEVICES=" + value,
		}
	}
	hidden := func(value string) Inventory {
		return Inventory{
			DriverVersion: "550.54.15",
			Source:        `none: the launcher's CUDA_VISIBLE_DEVICES="` + value + `" hides every GPU`,
		}
	}
	noDriver := none("no NVIDIA driver: nvidia-smi not found in PATH")
	cases := map[string]struct {
		inv   Inventory
		value string
		set   bool
		want  Inventory
	}{
		"unset":                       {inv: h100Inventory(), value: "", set: false, want: h100Inventory()},
		"unset ignores value":         {inv: h100Inventory(), value: "0", set: false, want: h100Inventory()},
		"empty hides all":             {inv: h100Inventory(), value: "", set: true, want: hidden("")},
		"minus one hides all":         {inv: h100Inventory(), value: "-1", set: true, want: hidden("-1")},
		"NoDevFiles hides all":        {inv: h100Inventory(), value: "NoDevFiles", set: true, want: hidden("NoDevFiles")},
		"one index":                   {inv: h100Inventory(), value: "2", set: true, want: restricted("2", 2)},
		"indices kept in index order": {inv: h100Inventory(), value: "3,1", set: true, want: restricted("3,1", 1, 3)},
		"spaces around entries":       {inv: h100Inventory(), value: " 0, 3 ", set: true, want: restricted("0, 3", 0, 3)},
		"full UUID": {
			inv: h100Inventory(), value: "GPU-e0e0e0e0-1111-2222-3333-444455556666", set: true,
			want: restricted("GPU-e0e0e0e0-1111-2222-3333-444455556666", 3),
		},
		"UUID prefix":             {inv: h100Inventory(), value: "GPU-5d1f", set: true, want: restricted("GPU-5d1f", 0)},
		"mixed index and prefix":  {inv: h100Inventory(), value: "1,GPU-5d1f", set: true, want: restricted("1,GPU-5d1f", 0, 1)},
		"no GPUs keeps reason":    {inv: noDriver, value: "0,1", set: true, want: noDriver},
		"no GPUs and empty value": {inv: noDriver, value: "", set: true, want: noDriver},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.inv.Visible(tc.value, tc.set)
			if err != nil {
				t.Fatalf("Visible(%q, %t): %v", tc.value, tc.set, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Visible(%q, %t) (-want +got):\n%s", tc.value, tc.set, diff)
			}
		})
	}
}

func TestVisibleErrors(t *testing.T) {
	cases := map[string]struct {
		value   string
		wantErr []string // substrings of the error
	}{
		"unknown index":       {value: "0,7", wantErr: []string{`CUDA_VISIBLE_DEVICES="0,7"`, `entry "7" matches no GPU`, "4 GPUs"}},
		"unknown UUID":        {value: "GPU-deadbeef", wantErr: []string{`entry "GPU-deadbeef" matches no GPU`}},
		"ambiguous prefix":    {value: "GPU-7a2b", wantErr: []string{`"GPU-7a2b" is ambiguous`}},
		"duplicate index":     {value: "1,1", wantErr: []string{`entries "1" and "1" both name GPU 1`}},
		"index and its UUID":  {value: "0,GPU-5d1f", wantErr: []string{`entries "0" and "GPU-5d1f" both name GPU 0`}},
		"empty entry":         {value: "0,,1", wantErr: []string{"empty entry"}},
		"minus one in a list": {value: "0,-1", wantErr: []string{`entry "-1" matches no GPU`}},
		"MIG instance":        {value: "MIG-0a1b2c3d", wantErr: []string{`"MIG-0a1b2c3d" is a MIG instance`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := h100Inventory().Visible(tc.value, true)
			if err == nil {
				t.Fatalf("Visible(%q) = %+v, want an error", tc.value, got)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
