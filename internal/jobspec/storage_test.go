package jobspec

import (
	"path/filepath"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestLocalStorage(t *testing.T) {
	t.Setenv(StagingEnv, "/stage")
	for in, want := range map[string]string{
		"/data/runs":         "/data/runs",
		"s3://bucket":        "/stage/s3/bucket",
		"s3://bucket/exp/a/": "/stage/s3/bucket/exp/a",
		"S3://bucket/exp":    "/stage/s3/bucket/exp",
		"gs://bucket/exp":    "gs://bucket/exp", // refused by Validate, never staged
	} {
		if got := LocalStorage(in); got != want {
			t.Errorf("LocalStorage(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RunFolder(&v1.TrainJobSpec{StoragePath: "s3://bkt/p", RunName: "fm"}); got != "/stage/s3/bkt/p/fm" {
		t.Errorf("RunFolder = %q", got)
	}
	t.Setenv(StagingEnv, "rel")
	if got := StagingRoot(); !filepath.IsAbs(got) {
		t.Errorf("StagingRoot with a relative %s = %q, want it absolute", StagingEnv, got)
	}
	t.Setenv(StagingEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if got := StagingRoot(); got != "/cache/trainyard/storage" {
		t.Errorf("StagingRoot = %q, want /cache/trainyard/storage", got)
	}
}
