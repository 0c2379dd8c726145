package mirror_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/mirror"
	"github.com/trainyard/trainyard/internal/testminio"
)

// rig is a run folder with a checkpoint store, mirrored to s3://runs/exp/run.
type rig struct {
	t     *testing.T
	srv   *testminio.Server
	dir   string
	store *checkpoint.Store
	m     *mirror.Mirror
	said  *notes
}

type notes struct {
	mu   sync.Mutex
	text []string
}

func (n *notes) add(s string) { n.mu.Lock(); n.text = append(n.text, s); n.mu.Unlock() }
func (n *notes) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.text, "\n")
}

func bucketStore(t *testing.T) *bucket.Store {
	t.Helper()
	u, _ := bucket.Parse("s3://runs/exp/run")
	s, err := bucket.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newRig starts a mirror of a new run folder; a first rig starts MinIO (srv nil).
func newRig(t *testing.T, srv *testminio.Server, policy checkpoint.Policy) *rig {
	t.Helper()
	if srv == nil {
		srv = testminio.Start(t)
		srv.Setenv(t)
		srv.MakeBucket(t, "runs")
	}
	r := &rig{t: t, srv: srv, dir: filepath.Join(t.TempDir(), "run"), said: &notes{}}
	r.m = mirror.New(bucketStore(t), r.dir, mirror.Options{Policy: policy, Notify: r.said.add})
	if _, err := r.m.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.store, err = checkpoint.Open(r.dir, nil); err != nil {
		t.Fatal(err)
	}
	r.store.SkipTo(r.m.Highest()) // as reporting's session does
	t.Cleanup(func() { r.store.Close(); _ = r.m.Close(context.Background()) })
	return r
}

// commit commits a checkpoint of one file (content) here and uploads it; it returns
// whether the upload committed it in the bucket.
func (r *rig) commit(content string) (checkpoint.Info, bool) {
	r.t.Helper()
	src := filepath.Join(r.t.TempDir(), "ck")
	if err := os.MkdirAll(src, 0o700); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "model.pt"), []byte(content), 0o600); err != nil {
		r.t.Fatal(err)
	}
	info, err := r.store.Commit(src, checkpoint.Meta{Iteration: 1, Metrics: checkpoint.Metrics{"loss": float64(len(content))}})
	if err != nil {
		r.t.Fatal(err)
	}
	done := make(chan bool, 1)
	r.m.Committed(info, func(ok bool) { done <- ok })
	select {
	case ok := <-done:
		return info, ok
	case <-time.After(2 * time.Minute):
		r.t.Fatalf("the upload of %s did not end in 2 minutes", info.Name)
	}
	return info, false
}

func (r *rig) manifests() []string {
	var out []string
	for _, k := range r.srv.Keys(r.t, "runs", "exp/run/") {
		if strings.HasSuffix(k, "/"+checkpoint.ManifestName) {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(k, "exp/run/"), "/"+checkpoint.ManifestName))
		}
	}
	return out
}

func TestUploadRetainAndRestoreElsewhere(t *testing.T) {
	a := newRig(t, nil, checkpoint.Policy{Keep: 2})
	for _, c := range []string{"one", "two", "three"} {
		if _, ok := a.commit(c); !ok {
			t.Fatalf("upload of %q failed: %s", c, a.said)
		}
	}
	if got := a.manifests(); !slices.Equal(got, []string{"checkpoint_000002", "checkpoint_000003"}) {
		t.Fatalf("committed in the bucket: %v; want the last 2 (keep 2)", got)
	}
	if err := a.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Another machine: an empty run folder gets the bucket's latest, which verifies.
	b := newRig(t, a.srv, checkpoint.Policy{Keep: 2})
	latest, skipped, err := b.store.Latest()
	if err != nil || len(skipped) > 0 {
		t.Fatalf("Latest after Restore: %v, skipped %v", err, skipped)
	}
	got, _ := os.ReadFile(filepath.Join(latest.Dir, "model.pt"))
	if latest.Name != "checkpoint_000003" || string(got) != "three" {
		t.Fatalf("restored %s holding %q; want checkpoint_000003 holding \"three\"", latest.Name, got)
	}
	// Its next commit is checkpoint_000004, and retention in the bucket goes on.
	if info, ok := b.commit("four"); !ok || info.Name != "checkpoint_000004" {
		t.Fatalf("next commit %s (uploaded %v)", info.Name, ok)
	}
	if got := b.manifests(); !slices.Equal(got, []string{"checkpoint_000003", "checkpoint_000004"}) {
		t.Fatalf("committed in the bucket: %v", got)
	}
}

func TestHalfUploadedIsNeverTheLatest(t *testing.T) {
	a := newRig(t, nil, checkpoint.Policy{})
	a.commit("one")
	// A checkpoint whose files are up but whose manifest is not: an upload cut short.
	put(t, a.srv, "exp/run/checkpoint_000002/model.pt", "half")
	b := newRig(t, a.srv, checkpoint.Policy{})
	latest, _, err := b.store.Latest()
	if err != nil || latest.Name != "checkpoint_000001" {
		t.Fatalf("Latest after Restore = %s, %v; want checkpoint_000001", latest.Name, err)
	}
	// The next checkpoint skips the index the cut-short upload used.
	if info, ok := b.commit("three"); !ok || info.Name != "checkpoint_000003" {
		t.Fatalf("next commit %s (uploaded %v); want checkpoint_000003", info.Name, ok)
	}
}

func TestChangedAfterCommitIsRefused(t *testing.T) {
	a := newRig(t, nil, checkpoint.Policy{})
	a.commit("the real one")
	put(t, a.srv, "exp/run/checkpoint_000001/model.pt", "tampered!!!!")
	m := mirror.New(bucketStore(t), filepath.Join(t.TempDir(), "run"), mirror.Options{})
	defer m.Close(context.Background())
	_, err := m.Restore(context.Background())
	if err == nil || !strings.Contains(err.Error(), "model.pt does not match its manifest") ||
		!strings.Contains(err.Error(), "changed in the bucket after the commit") {
		t.Fatalf("Restore = %v; want the manifest's checksum to refuse it", err)
	}
}

func TestTwoRunsNeverCommitTheSameIndex(t *testing.T) {
	a := newRig(t, nil, checkpoint.Policy{})
	b := newRig(t, a.srv, checkpoint.Policy{}) // started before a committed anything
	if _, ok := a.commit("a's"); !ok {
		t.Fatal(a.said)
	}
	if _, ok := b.commit("b's"); ok {
		t.Fatal("b committed checkpoint_000001 over a's")
	}
	if !strings.Contains(b.said.String(), "checkpoint_000001 was not uploaded") ||
		!strings.Contains(b.said.String(), "committed in the bucket already, by another run of the same name") {
		t.Fatalf("b was told: %s", b.said)
	}
	data := a.srv.Object(t, "runs", "exp/run/checkpoint_000001/model.pt")
	if data != "a's" {
		t.Fatalf("the bucket's checkpoint_000001 holds %q", data)
	}
}

func TestUploadOutlivesTheServerRestarting(t *testing.T) {
	a := newRig(t, nil, checkpoint.Policy{})
	a.srv.Stop()
	go func() {
		time.Sleep(3 * time.Second)
		a.srv.Restart(t)
	}()
	if _, ok := a.commit("while the server was down"); !ok {
		t.Fatalf("upload failed: %s", a.said)
	}
	if got := a.manifests(); !slices.Equal(got, []string{"checkpoint_000001"}) {
		t.Fatalf("committed in the bucket: %v", got)
	}
}

func put(t *testing.T, srv *testminio.Server, key, data string) {
	t.Helper()
	_, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("runs"), Key: aws.String(key),
		Body: strings.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
}

// A store that answers 503 SlowDown (S3's throttling) to the first requests: the
// uploads back off and go through.
func TestThrottledUploadsGoThrough(t *testing.T) {
	srv := testminio.Start(t)
	srv.Setenv(t)
	srv.MakeBucket(t, "runs")
	target, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var slowed atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && slowed.Add(1) <= 3 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>`+
				`<Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	t.Setenv("AWS_ENDPOINT_URL", front.URL)
	a := newRig(t, srv, checkpoint.Policy{})
	if _, ok := a.commit("through the throttle"); !ok {
		t.Fatalf("upload failed: %s", a.said)
	}
	if got := a.manifests(); !slices.Equal(got, []string{"checkpoint_000001"}) {
		t.Fatalf("committed in the bucket: %v", got)
	}
	if n := slowed.Load(); n <= 3 {
		t.Fatalf("only %d PUTs: the throttle was not met", n)
	}
}
