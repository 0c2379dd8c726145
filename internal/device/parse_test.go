package device

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseQuery(t *testing.T) {
	cases := map[string]struct {
		out        string
		wantGPUs   []GPU
		wantDriver string
	}{
		"four H100s": {
			out:        h100Output,
			wantGPUs:   h100s(0, 1, 2, 3),
			wantDriver: "550.54.15",
		},
		"empty output":     {out: ""},
		"blank lines only": {out: "\n  \n\r\n"},
		"CRLF, extra spaces and out of order": {
			out: "  1 ,GPU-b , Tesla T4 ,15360,0,0, 535.1 \r\n\r\n0,GPU-a,Tesla T4,15360,5,12,535.1\r\n",
			wantGPUs: []GPU{
				{Index: 0, UUID: "GPU-a", Name: "Tesla T4", MemoryMiB: 15360, MemoryUsedMiB: 5, UtilizationPercent: 12},
				{Index: 1, UUID: "GPU-b", Name: "Tesla T4", MemoryMiB: 15360},
			},
			wantDriver: "535.1",
		},
		"N/A and Not Supported fields": {
			out: "0, GPU-a, [N/A], [N/A], [Not Supported], [Not Supported], 550.54.15\n" +
				"1, GPU-b, NVIDIA A100, 40960, N/A, [Unknown Error], [N/A]\n",
			wantGPUs: []GPU{
				{Index: 0, UUID: "GPU-a", UtilizationPercent: -1},
				{Index: 1, UUID: "GPU-b", Name: "NVIDIA A100", MemoryMiB: 40960, UtilizationPercent: -1},
			},
			wantDriver: "550.54.15",
		},
		"units despite nounits": {
			out: "0, GPU-a, NVIDIA L4, 23034 MiB, 0 MiB, 7 %, 550.54.15\n",
			wantGPUs: []GPU{
				{Index: 0, UUID: "GPU-a", Name: "NVIDIA L4", MemoryMiB: 23034, UtilizationPercent: 7},
			},
			wantDriver: "550.54.15",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gpus, driver, err := parseQuery(tc.out)
			if err != nil {
				t.Fatalf("parseQuery: %v", err)
			}
			if diff := cmp.Diff(tc.wantGPUs, gpus); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDriver, driver); diff != "" {
				t.Errorf("driver (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseQueryErrors(t *testing.T) {
	cases := map[string]struct {
		out     string
		wantErr []string // substrings of the error
	}{
		"too few fields": {
			out:     h100Output + "4, GPU-x, NVIDIA H100\n",
			wantErr: []string{"line 5", `"4, GPU-x, NVIDIA H100"`, "want 7", "got 3"},
		},
		"too many fields": {
			out:     "0, GPU-a, NVIDIA, H100, 81559, 1, 0, 550.54.15\n",
			wantErr: []string{"line 1", "got 8"},
		},
		"not CSV at all": {
			out:     "Segmentation fault\n",
			wantErr: []string{"line 1", `"Segmentation fault"`},
		},
		"index not a number": {
			out:     "[N/A], GPU-a, NVIDIA H100, 81559, 1, 0, 550.54.15\n",
			wantErr: []string{"line 1", "index", `"[N/A]"`},
		},
		"uuid missing": {
			out:     "0, [N/A], NVIDIA H100, 81559, 1, 0, 550.54.15\n",
			wantErr: []string{"uuid", `"[N/A]"`},
		},
		"memory garbage": {
			out:     "0, GPU-a, NVIDIA H100, lots, 1, 0, 550.54.15\n",
			wantErr: []string{"memory.total", `"lots"`},
		},
		"negative utilization": {
			out:     "0, GPU-a, NVIDIA H100, 81559, 1, -5, 550.54.15\n",
			wantErr: []string{"utilization.gpu", `"-5"`},
		},
		"duplicate index": {
			out:     "0, GPU-a, H100, 1, 1, 0, 1\n0, GPU-b, H100, 1, 1, 0, 1\n",
			wantErr: []string{"index 0 appears twice"},
		},
		"duplicate uuid": {
			out:     "0, GPU-a, H100, 1, 1, 0, 1\n1, GPU-a, H100, 1, 1, 0, 1\n",
			wantErr: []string{"uuid GPU-a appears twice"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gpus, _, err := parseQuery(tc.out)
			if err == nil {
				t.Fatalf("parseQuery = %v, want an error", gpus)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
