package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseSizes(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []int64
		wantErr bool
	}{
		"defaults":       {in: "1MB,10MB,100MB,1GB", want: []int64{1e6, 1e7, 1e8, 1e9}},
		"binary units":   {in: "4KiB, 1.5MiB,1GiB", want: []int64{4096, 3 << 19, 1 << 30}},
		"bytes":          {in: "512B,7", want: []int64{512, 7}},
		"not a size":     {in: "big", wantErr: true},
		"zero":           {in: "0MB", wantErr: true},
		"unknown suffix": {in: "1TB", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseSizes(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseSizes(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseSizes(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestMedianAndSizeName(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	if got := median(ms(5, 1, 3)); got != 3*time.Millisecond {
		t.Errorf("median of 5 1 3 = %v", got)
	}
	if got := median(ms(4, 1, 3, 2)); got != 2500*time.Microsecond {
		t.Errorf("median of 4 1 3 2 = %v", got)
	}
	got := []string{sizeName(1e6), sizeName(1 << 30), sizeName(1e9), sizeName(1500)}
	if diff := cmp.Diff([]string{"1 MB", "1 GiB", "1 GB", "1500 B"}, got); diff != "" {
		t.Errorf("sizeName (-want +got):\n%s", diff)
	}
}
