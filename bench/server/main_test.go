package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

func TestQuantile(t *testing.T) {
	ds := []time.Duration{40, 10, 30, 20} // unsorted on purpose
	cases := map[string]struct {
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		"none":              {nil, 0.5, 0},
		"one":               {[]time.Duration{7}, 0.9, 7},
		"median of an even": {ds, 0.5, 25},
		"p90 interpolates":  {ds, 0.9, 37},
		"min":               {ds, 0, 10},
		"max":               {ds, 1, 40},
	}
	for name, c := range cases {
		if got := quantile(c.in, c.q); got != c.want {
			t.Errorf("%s: quantile(%v, %v) = %v, want %v", name, c.in, c.q, got, c.want)
		}
	}
	if ds[0] != 40 {
		t.Error("quantile sorted its argument")
	}
}

func TestHammer(t *testing.T) {
	done := make([]int, 100)
	r, err := hammer(len(done), 7, func(i int) error { done[i]++; return nil })
	if err != nil || r.n != 100 || r.workers != 7 || len(r.each) != 100 {
		t.Fatalf("hammer = %+v, %v", r, err)
	}
	for i, n := range done {
		if n != 1 {
			t.Errorf("op(%d) ran %d times, want once", i, n)
		}
	}
	boom := errors.New("boom")
	if _, err := hammer(100, 3, func(i int) error {
		if i == 10 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("hammer with a failing op = %v, want %v", err, boom)
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-trainyard", "/x/trainyard", "-runs", "3"})
	if err != nil || cfg.trainyard != "/x/trainyard" || cfg.runs != 3 || cfg.clients != 50 || cfg.submissions != 2000 ||
		cfg.finished != 10000 || cfg.queued != 1000 {
		t.Fatalf("parseFlags = %+v, %v", cfg, err)
	}
	if _, err := parseFlags([]string{"-runs", "0"}); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("parseFlags(-runs 0) = %v, want a usage error", err)
	}
}

func TestReportMemoryVerdict(t *testing.T) {
	r := memoryResult{finished: 10, queued: 1, points: []memPoint{{what: "x", mem: host.Memory{RSS: 150e6, HWM: 210e6}}}}
	var b strings.Builder
	writeMemory(&b, r)
	if !strings.Contains(b.String(), "NOT met (peak 210.0 MB)") {
		t.Errorf("a peak over the aim is not reported as such:\n%s", b.String())
	}
}
