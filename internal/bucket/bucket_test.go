package bucket_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/testminio"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"s3://my-bucket":                "s3://my-bucket",
		"s3://my-bucket/":               "s3://my-bucket",
		"s3://my-bucket/experiments/a/": "s3://my-bucket/experiments/a",
		"S3://b.c-d/x":                  "s3://b.c-d/x",
	} {
		u, err := bucket.Parse(in)
		if err != nil || u.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for in, want := range map[string]string{
		"/data/runs":       "not a URI",
		"s3://":            "is not a bucket name",
		"s3://My_Bucket/x": `"My_Bucket" is not a bucket name`,
		"s3://b..c/x":      "is not a bucket name",
		"s3://bkt/a//b":    "has an empty, . or .. part",
		"s3://bkt/a/../b":  "has an empty, . or .. part",
		"gs://bkt/x":       "gs:// is not supported yet; use Cloud Storage's S3-compatible API instead: s3://bkt/x with AWS_ENDPOINT_URL=https://storage.googleapis.com",
		"file:///data":     "give the folder as a path (/data), not a file:// URI",
		"hdfs://nn/x":      "the scheme hdfs:// is not supported: give s3://bucket/prefix or a folder",
	} {
		if _, err := bucket.Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v; want an error with %q", in, err, want)
		}
	}
}

func TestPathStyle(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"":                                   false,
		"http://127.0.0.1:9000":              true,
		"http://localhost:9000":              true,
		"http://minio:9000":                  true,
		"http://minio.storage.svc:9000":      true,
		"https://s3.us-west-2.amazonaws.com": false,
		"https://account.r2.cloudflarestorage.com": false,
	} {
		t.Setenv("AWS_ENDPOINT_URL", endpoint)
		s, err := bucket.Open(context.Background(), bucket.URI{Scheme: "s3", Bucket: "b"})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.PathStyle(); got != want {
			t.Errorf("endpoint %q: path style %v, want %v", endpoint, got, want)
		}
	}
	t.Setenv(bucket.PathStyleEnv, "maybe")
	if _, err := bucket.Open(context.Background(), bucket.URI{Scheme: "s3", Bucket: "b"}); err == nil ||
		!strings.Contains(err.Error(), "give true or false") {
		t.Errorf("%s=maybe: %v", bucket.PathStyleEnv, err)
	}
}

func open(t *testing.T, uri string) *bucket.Store {
	t.Helper()
	u, err := bucket.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bucket.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAgainstMinIO(t *testing.T) {
	srv := testminio.Start(t)
	srv.Setenv(t)
	srv.MakeBucket(t, "runs")
	ctx := context.Background()
	s := open(t, "s3://runs/exp/a")
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("a commit point is written once", func(t *testing.T) {
		if err := s.PutIfAbsent(ctx, "c/manifest", []byte("one")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIfAbsent(ctx, "c/manifest", []byte("two")); !errors.Is(err, bucket.ErrExists) {
			t.Fatalf("second PutIfAbsent: %v, want ErrExists", err)
		}
		got, err := s.Get(ctx, "c/manifest", 100)
		if err != nil || string(got) != "one" {
			t.Fatalf("Get = %q, %v; want the first write", got, err)
		}
	})

	t.Run("a large file goes up and comes down in parts", func(t *testing.T) {
		data := make([]byte, 2*bucket.PartSize+12345)
		_, _ = rand.Read(data)
		src := filepath.Join(t.TempDir(), "big")
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.PutFile(ctx, "big/model.pt", src); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "copy")
		if err := s.GetFile(ctx, "big/model.pt", dst, int64(len(data))); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(dst)
		if !bytes.Equal(got, data) {
			t.Fatalf("the file came back different (%d bytes, want %d)", len(got), len(data))
		}
	})

	t.Run("list and delete", func(t *testing.T) {
		objs, err := s.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		if strings.Join(keys, " ") != "big/model.pt c/manifest" {
			t.Fatalf("List = %v", keys)
		}
		if err := s.Delete(ctx, "big/model.pt", "c/manifest", "not/there"); err != nil {
			t.Fatal(err)
		}
		if keys := srv.Keys(t, "runs", ""); len(keys) != 0 {
			t.Fatalf("left after Delete: %v", keys)
		}
		if _, err := s.Get(ctx, "c/manifest", 100); !errors.Is(err, bucket.ErrNotFound) {
			t.Fatalf("Get of a deleted object: %v, want ErrNotFound", err)
		}
	})

	t.Run("a missing bucket is said", func(t *testing.T) {
		err := open(t, "s3://no-such-bucket/x").Check(ctx)
		if err == nil || !strings.Contains(err.Error(), "the bucket no-such-bucket does not exist") {
			t.Fatalf("Check = %v", err)
		}
	})

	t.Run("wrong credentials are said, without the secret", func(t *testing.T) {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-123")
		err := open(t, "s3://runs/x").Check(ctx)
		if err == nil || !strings.Contains(err.Error(), "access denied with the credentials found (AWS_ACCESS_KEY_ID from the environment)") {
			t.Fatalf("Check = %v", err)
		}
		if strings.Contains(err.Error(), "wrong-secret-123") {
			t.Fatalf("the error shows the secret: %v", err)
		}
	})
}
