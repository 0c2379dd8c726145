// Package testminio starts a real S3 server for tests: MinIO, built by `make` from the Go
// module proxy (a test server only, under the AGPL: never linked into Trainyard) and named
// by $TRAINYARD_MINIO. Tests skip when it is unset; `make test` sets it.
package testminio

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Env names the MinIO binary.
const Env = "TRAINYARD_MINIO"

// The server's credentials.
const (
	AccessKey = "trainyard-test"
	SecretKey = "trainyard-test-secret"
)

// Server is a running MinIO.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	dir      string
	bin      string
	port     int
	cmd      *exec.Cmd
}

// Start starts MinIO in a temporary folder, stopped when the test ends; it skips the test
// when $TRAINYARD_MINIO is unset.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		t.Skipf("%s is not set (make test builds MinIO and sets it)", Env)
	}
	s, err := StartIn(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartIn starts the MinIO binary bin with its data in dir, on a free port of the loopback
// (for benchmarks; tests use Start). Stop stops it.
func StartIn(bin, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, port: port}
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.port)
	return s, s.start()
}

func (s *Server) start() error {
	s.cmd = exec.Command(s.bin, "server", "--quiet", "--address", "127.0.0.1:"+strconv.Itoa(s.port),
		"--console-address", "127.0.0.1:0", filepath.Join(s.dir, "data"))
	s.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start MinIO: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("MinIO at %s did not come up in 60s", s.Endpoint)
}

// CPU is the CPU time the server has used so far (user and system), read from /proc.
func (s *Server) CPU() time.Duration {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name in parentheses: utime and stime are the 12th and
	// 13th of them, in clock ticks (100 a second on Linux).
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(u+st) * 10 * time.Millisecond
}

// Stop kills the server (its data stays until the test ends).
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart starts the server again on the same port and data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// Env is the environment a client of this server needs (the AWS SDK's variables).
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"}
}

// Setenv sets Env in this process for the test.
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Client is an S3 client of the server, for a test's own checks.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// MakeBucket creates a bucket.
func (s *Server) MakeBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.CreateBucket(name); err != nil {
		t.Fatal(err)
	}
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(name string) error {
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// Object reads the object key of bucket whole.
func (s *Server) Object(t testing.TB, bucket, key string) string {
	t.Helper()
	out, err := s.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	return string(data)
}

// Keys lists the keys under prefix in bucket.
func (s *Server) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
