package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHost(t *testing.T) {
	if CPU() == "?" || Kernel() == "?" || !strings.HasSuffix(MemTotalGiB(), " GiB") || len(strings.Fields(LoadAverage())) != 3 {
		t.Errorf("cpu %q kernel %q memory %q load %q", CPU(), Kernel(), MemTotalGiB(), LoadAverage())
	}
	m, err := ReadMemory(os.Getpid())
	if err != nil || m.RSS <= 0 || m.HWM < m.RSS {
		t.Errorf("memory %+v, %v", m, err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := CopyFile("/proc/self/exe", dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 || fi.Size() == 0 {
		t.Errorf("copy: %v %v", fi, err)
	}
}
