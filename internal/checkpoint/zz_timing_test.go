package checkpoint

import (
	"fmt"
	"os"
	"testing"
	"time"
	"log/slog"
	"path/filepath"
)

func TestZZTiming(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	for round := 0; round < 8; round++ {
		run := filepath.Join("/tmp", fmt.Sprintf("zz-run-%d", round))
		os.MkdirAll(run, 0o755)

		s, _ := Open(run, slog.New(slog.DiscardHandler))
		src, _ := os.MkdirTemp("/dev/shm", "zz")

		block := make([]byte, zzSize())
		for i := range block { block[i] = byte(i*7) }
		for i := 0; i < 4; i++ { os.WriteFile(filepath.Join(src, fmt.Sprint(i)), block, 0o644) }
		last := time.Now()
		start := last
		var log []string
		s.testHook = func(step string) error {
			now := time.Now()
			log = append(log, fmt.Sprintf("%s=%.1f", step, float64(now.Sub(last).Microseconds())/1000))
			last = now
			return nil
		}
		if _, err := s.Commit(src, Meta{}); err != nil { t.Fatal(err) }
		os.RemoveAll(run); os.RemoveAll(src)
		t.Logf("total %.1f ms: %v", float64(time.Since(start).Microseconds())/1000, log)
	}
}

func zzSize() int {
	var n int
	fmt.Sscan(os.Getenv("ZZ"), &n)
	return n / 4
}
