package device

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// driverFailure is what nvidia-smi prints when the driver is not loaded.
const driverFailure = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. " +
	"Make sure that the latest NVIDIA driver is installed and running."

// fakeSMI writes an executable nvidia-smi shell script with the given body
// into a new temporary directory and returns its path. The script fails
// unless it is called with the discovery query.
func fakeSMI(t *testing.T, body string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("fake nvidia-smi scripts need a POSIX shell")
	}
	script := "#!/bin/sh\n" +
		`if [ "$1" != "--query-gpu=` + strings.Join(queryFields, ",") + `" ] || ` +
		`[ "$2" != "--format=csv,noheader,nounits" ]; then echo "bad arguments: $*" >&2; exit 2; fi` + "\n" +
		body + "\n"
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatalf("write fake nvidia-smi: %v", err)
	}
	return path
}

func TestDiscoverFake(t *testing.T) {
	cases := map[string]struct {
		body string
		want Inventory
	}{
		"four H100s": {
			body: "cat <<'EOF'\n" + h100Output + "EOF",
			want: h100Inventory(),
		},
		"no driver": {
			body: `echo "` + driverFailure + `"` + "\nexit 9",
			want: none("no NVIDIA driver: nvidia-smi: " + driverFailure),
		},
		"no driver on stderr": {
			body: `echo "NVIDIA-SMI 550.54.15" >&2; echo "` + driverFailure + `" >&2` + "\nexit 9",
			want: none("no NVIDIA driver: nvidia-smi: " + driverFailure),
		},
		"no devices": {
			body: "echo 'No devices were found'\nexit 6",
			want: none("nvidia-smi (NVML) found no GPU"),
		},
		"no devices with exit 0": {
			body: "echo 'No devices were found'",
			want: none("nvidia-smi (NVML) found no GPU"),
		},
		"empty output": {
			body: "exit 0",
			want: none("nvidia-smi (NVML) found no GPU"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := fakeSMI(t, tc.body)
			got, err := DiscoverWith(t.Context(), Options{NvidiaSMI: path})
			if err != nil {
				t.Fatalf("DiscoverWith: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DiscoverWith (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiscoverFakeErrors(t *testing.T) {
	cases := map[string]struct {
		body    string
		timeout time.Duration
		wantErr []string // substrings of the error
	}{
		"version mismatch": {
			body:    "echo 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18",
			wantErr: []string{"exit status 18", "Driver/library version mismatch"},
		},
		"silent failure": {
			body:    "exit 3",
			wantErr: []string{"exit status 3"},
		},
		"garbage": {
			body:    "echo 'Segmentation fault'",
			wantErr: []string{"line 1", `"Segmentation fault"`},
		},
		"hangs": {
			body:    "exec sleep 10",
			timeout: 100 * time.Millisecond,
			wantErr: []string{"no answer within 100ms"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := fakeSMI(t, tc.body)
			got, err := DiscoverWith(t.Context(), Options{NvidiaSMI: path, Timeout: tc.timeout})
			if err == nil {
				t.Fatalf("DiscoverWith = %+v, want an error", got)
			}
			for _, want := range append(tc.wantErr, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestDiscoverCanceled(t *testing.T) {
	path := fakeSMI(t, "exec sleep 10")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := DiscoverWith(ctx, Options{NvidiaSMI: path})
	if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("DiscoverWith with a canceled context: error %v, want one saying %q", err, context.Canceled)
	}
}

func TestDiscoverMissingBinary(t *testing.T) {
	t.Run("not in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		got, err := Discover(t.Context())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		want := none("no NVIDIA driver: nvidia-smi not found in PATH")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Discover (-want +got):\n%s", diff)
		}
	})
	t.Run("explicit path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nvidia-smi")
		got, err := DiscoverWith(t.Context(), Options{NvidiaSMI: path})
		if err != nil {
			t.Fatalf("DiscoverWith: %v", err)
		}
		want := none("no NVIDIA driver: " + path + " does not exist")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("DiscoverWith (-want +got):\n%s", diff)
		}
	})
}

func TestDiscoverFromPATH(t *testing.T) {
	path := fakeSMI(t, "cat <<'EOF'\n"+h100Output+"EOF")
	t.Setenv("PATH", filepath.Dir(path)+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, err := Discover(t.Context())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if diff := cmp.Diff(h100Inventory(), got); diff != "" {
		t.Errorf("Discover (-want +got):\n%s", diff)
	}
}

// TestDiscoverRealGPU runs discovery against this machine's real driver.
func TestDiscoverRealGPU(t *testing.T) {
	inv, err := Discover(t.Context())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(inv.GPUs) == 0 {
		t.Skipf("no NVIDIA GPU here: %s", inv.Source)
	}
	t.Logf("driver %s, source %s", inv.DriverVersion, inv.Source)
	for _, g := range inv.GPUs {
		t.Logf("GPU %d %s %s: %d/%d MiB used, %d%% busy",
			g.Index, g.UUID, g.Name, g.MemoryUsedMiB, g.MemoryMiB, g.UtilizationPercent)
		if !strings.HasPrefix(g.UUID, "GPU-") || g.MemoryMiB <= 0 {
			t.Errorf("GPU %d looks wrong: %+v", g.Index, g)
		}
	}
}
