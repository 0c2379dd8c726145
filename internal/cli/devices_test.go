package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// devices -o json uses camelCase names, and an empty list of GPUs is [], not null.
func TestDevicesJSON(t *testing.T) {
	smi := t.TempDir()
	script := `#!/bin/sh
cat <<'ROWS'
0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559, 1024, 12, 570.86.15
1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA H100 80GB HBM3, 81559, 0, [N/A], 570.86.15
ROWS
`
	if err := os.WriteFile(filepath.Join(smi, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	cases := map[string]string{
		"devices-json":        smi + ":/usr/bin:/bin",
		"devices-json-no-gpu": "/usr/bin:/bin",
	}
	for name, path := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("PATH", path)
			code, out, errOut := trainyard("devices", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, name, out)
		})
	}
}
