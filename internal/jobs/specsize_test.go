package jobs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/store"
)

// A job whose spec its supervisor would refuse to read (40,000 env vars: 1.2 MB of YAML)
// is refused at submit, with the size and the limit; one exactly at the limit, GPU
// lease variables and all, is accepted and runs.
func TestSpecSizeIsCheckedAtSubmit(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	e.setup = func(s *Service) {
		s.cfg.LeaseSocket, s.cfg.LeaseKey = filepath.Join(e.dir, "lease.sock"), []byte("key")
	}
	e.open()
	t.Cleanup(e.close)

	big := e.job("true", "")
	for i := range 40_000 {
		big.Spec.Env = append(big.Spec.Env, v1.EnvVar{Name: fmt.Sprintf("V%05d", i), Value: "x"})
	}
	_, err := e.svc.Submit(Submission{ID: "big", Job: big})
	if !errors.Is(err, ErrSpecTooLarge) || !strings.Contains(err.Error(), strconv.Itoa(jobspec.MaxFileSize)) {
		t.Fatalf("submit of 40,000 env vars: %v, want ErrSpecTooLarge naming the limit %d", err, jobspec.MaxFileSize)
	}
	if size, _ := e.svc.specSize("big", big); !strings.Contains(err.Error(), strconv.Itoa(size)+" bytes") {
		t.Errorf("the refusal %q does not say the spec's size, %d bytes", err, size)
	}
	if _, err := e.store.Get("big"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused job was stored: %v", err)
	}

	full := e.job("true", "")
	for i := range 12 { // none over Linux's 128 KiB for one variable
		full.Spec.Env = append(full.Spec.Env, v1.EnvVar{Name: fmt.Sprintf("PAD%02d", i), Value: "x"})
	}
	base, err := e.svc.specSize("full", full)
	if err != nil {
		t.Fatal(err)
	}
	for i, left := 0, jobspec.MaxFileSize-base; left > 0; i++ {
		more := min(left, 100_000)
		full.Spec.Env[i].Value += strings.Repeat("x", more)
		left -= more
	}
	if size, _ := e.svc.specSize("full", full); size != jobspec.MaxFileSize {
		t.Fatalf("padded spec is %d bytes, want exactly %d", size, jobspec.MaxFileSize)
	}
	if _, err := e.svc.Submit(Submission{ID: "full", Job: full}); err != nil {
		t.Fatalf("a spec at the limit: %v", err)
	}
	if j := e.waitFor("full", store.Succeeded, store.Failed); j.Status != store.Succeeded {
		t.Errorf("the job at the limit: %s (%s); its supervisor could not take its spec", j.Status, j.Message)
	}
}
