package ganglease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Check accepts a gang of at least one worker, with GPUs or not, up to 1<<16 of workers or
// GPUs, and refuses anything else with a message naming what is wrong. It does not
// look at Job or Secret: the server checks those.
func TestRequestCheck(t *testing.T) {
	cases := map[string]struct {
		req  Request
		want string // a part of the error; "" for none
	}{
		"one worker, one GPU":             {req: Request{Workers: 1, GPUsPerWorker: 1}},
		"the largest sizes":               {req: Request{Workers: 1 << 16, GPUsPerWorker: 1 << 16}},
		"no job or secret is fine":        {req: Request{Workers: 2, GPUsPerWorker: 4}},
		"no workers":                      {req: Request{GPUsPerWorker: 1}, want: "workers is 0"},
		"negative workers":                {req: Request{Workers: -1, GPUsPerWorker: 1}, want: "workers is -1"},
		"a gang on CPUs":                  {req: Request{Workers: 2, MilliCPUPerWorker: 8000, MemoryBytesPerWorker: 1 << 30}},
		"negative GPUs per worker":        {req: Request{Workers: 1, GPUsPerWorker: -2}, want: "gpusPerWorker -2, milliCPUPerWorker 0, memoryBytesPerWorker 0: none may be negative"},
		"negative CPU per worker":         {req: Request{Workers: 1, MilliCPUPerWorker: -1}, want: "milliCPUPerWorker -1"},
		"negative memory per worker":      {req: Request{Workers: 1, MemoryBytesPerWorker: -1}, want: "memoryBytesPerWorker -1"},
		"too many workers":                {req: Request{Workers: 1<<16 + 1, GPUsPerWorker: 1}, want: "65537 workers × 1 GPUs is more than any machine has"},
		"too many GPUs per worker":        {req: Request{Workers: 1, GPUsPerWorker: 1<<16 + 1}, want: "1 workers × 65537 GPUs is more than any machine has"},
		"workers checked before GPUs":     {req: Request{Workers: 0, GPUsPerWorker: 0}, want: "workers is 0"},
		"a negative size before too many": {req: Request{Workers: 1 << 20, GPUsPerWorker: -1}, want: "none may be negative"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.req.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A job's secret is valid for that job under that key only: not for another job, not
// under another key, and not when altered.
func TestSecretAndValid(t *testing.T) {
	key := []byte("server key")
	secret := Secret(key, "raysubmit_a")
	if secret != Secret(key, "raysubmit_a") || len(secret) != 64 {
		t.Fatalf("Secret is %q (and not stable?); want 64 hex digits, the same each time", secret)
	}
	cases := map[string]struct {
		key         []byte
		job, secret string
		want        bool
	}{
		"the job's secret":      {key: key, job: "raysubmit_a", secret: secret, want: true},
		"another job":           {key: key, job: "raysubmit_b", secret: secret},
		"another key":           {key: []byte("other key"), job: "raysubmit_a", secret: secret},
		"no key":                {job: "raysubmit_a", secret: secret},
		"an empty secret":       {key: key, job: "raysubmit_a"},
		"upper-case hex":        {key: key, job: "raysubmit_a", secret: strings.ToUpper(secret)},
		"a prefix of it":        {key: key, job: "raysubmit_a", secret: secret[:63]},
		"another job's secret":  {key: key, job: "raysubmit_a", secret: Secret(key, "raysubmit_b")},
		"the job ID as secret":  {key: key, job: "raysubmit_a", secret: "raysubmit_a"},
		"an empty job's secret": {key: key, job: "", secret: Secret(key, ""), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Valid(tc.key, tc.job, tc.secret); got != tc.want {
				t.Errorf("Valid(%q, %q, %q) = %v, want %v", tc.key, tc.job, tc.secret, got, tc.want)
			}
		})
	}
}

// Visible lists every worker's GPUs, worker 0's first, in the order granted.
func TestVisible(t *testing.T) {
	cases := map[string]struct {
		gpus [][]int
		want string
	}{
		"none":                     {want: ""},
		"one GPU":                  {gpus: [][]int{{3}}, want: "3"},
		"workers in order":         {gpus: [][]int{{2, 3}, {0, 1}}, want: "2,3,0,1"},
		"a worker without any GPU": {gpus: [][]int{{}, {5}}, want: "5"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Visible(tc.gpus); got != tc.want {
				t.Errorf("Visible(%v) = %q, want %q", tc.gpus, got, tc.want)
			}
		})
	}
}

// FromEnv finds no lease outside a server's job (no socket in the environment, or an
// empty one), and inside one fills the request from the environment and the sizes.
func TestFromEnv(t *testing.T) {
	t.Setenv(EnvJob, "raysubmit_a")
	t.Setenv(EnvSecret, "s3cret")
	for name, set := range map[string]bool{"unset": false, "empty": true} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvSocket, "")
			if !set {
				os.Unsetenv(EnvSocket)
			}
			socket, req, ok := FromEnv(Request{Workers: 2, GPUsPerWorker: 1})
			if ok || socket != "" || req != (Request{}) {
				t.Errorf("FromEnv = %q, %+v, %v; want no lease", socket, req, ok)
			}
		})
	}
	t.Setenv(EnvSocket, "/state/lease.sock")
	socket, req, ok := FromEnv(Request{Workers: 3, GPUsPerWorker: 2, MilliCPUPerWorker: 1500, MemoryBytesPerWorker: 1 << 30})
	want := Request{Job: "raysubmit_a", Secret: "s3cret", Workers: 3, GPUsPerWorker: 2, MilliCPUPerWorker: 1500, MemoryBytesPerWorker: 1 << 30}
	if !ok || socket != "/state/lease.sock" || req != want {
		t.Errorf("FromEnv = %q, %+v, %v; want /state/lease.sock, %+v, true", socket, req, ok, want)
	}
}

// Acquire refuses a request that Check refuses without asking the server (there is none
// at the path).
func TestAcquireChecksFirst(t *testing.T) {
	_, err := Acquire(context.Background(), filepath.Join(t.TempDir(), "none.sock"), Request{Workers: 0, GPUsPerWorker: 1}, nil)
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "workers is 0") {
		t.Errorf("Acquire = %v, want a *RefusedError saying workers is 0", err)
	}
}

// Acquire reads the server's answer: it reports each reason the lease waits and returns
// the GPUs; a refusal (a status other than 200, or an error event) is a *RefusedError
// with the server's reason; a stream that ends before GPUs is an error of another kind.
func TestAcquireReadsTheAnswer(t *testing.T) {
	cases := map[string]struct {
		status  int
		body    string
		waits   []string
		gpus    [][]int
		refused string // the RefusedError's reason; "" for none
		err     string // a part of another error
	}{
		"granted at once": {status: 200, body: `{"gpus":[[1],[2]]}` + "\n", gpus: [][]int{{1}, {2}}},
		"waits, then granted": {status: 200,
			body:  `{"waiting":"needs 2 GPUs, 1 free"}` + "\n" + `{"waiting":"needs 2 GPUs, 0 free"}` + "\n" + `{"gpus":[[0,3]]}` + "\n",
			waits: []string{"needs 2 GPUs, 1 free", "needs 2 GPUs, 0 free"}, gpus: [][]int{{0, 3}}},
		"refused by status":   {status: 403, body: "the secret does not match the job\n", refused: "the secret does not match the job"},
		"refused by an event": {status: 200, body: `{"waiting":"w"}` + "\n" + `{"error":"the job ended"}` + "\n", waits: []string{"w"}, refused: "the job ended"},
		"ends before GPUs":    {status: 200, body: `{"waiting":"w"}` + "\n", waits: []string{"w"}, err: io.ErrUnexpectedEOF.Error()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			socket := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var waits []string
			lease, err := Acquire(ctx, socket, Request{Job: "j", Secret: "s", Workers: 1, GPUsPerWorker: 1},
				func(why string) { waits = append(waits, why) })
			defer lease.Release()
			var refused *RefusedError
			switch {
			case tc.gpus != nil && (err != nil || !cmp.Equal(lease.GPUs, tc.gpus)):
				t.Errorf("Acquire = %v, %v; want GPUs %v", lease, err, tc.gpus)
			case tc.refused != "" && (!errors.As(err, &refused) || refused.Reason != tc.refused):
				t.Errorf("Acquire: %v, want a *RefusedError with reason %q", err, tc.refused)
			case tc.err != "" && (err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Acquire: %v, want an error (not a refusal) containing %q", err, tc.err)
			}
			if !cmp.Equal(waits, tc.waits) {
				t.Errorf("waiting reasons %q, want %q", waits, tc.waits)
			}
		})
	}
}

// serve answers lease requests with handle on a Unix socket until the test ends, and
// returns the socket's path.
func serve(t *testing.T, handle http.HandlerFunc) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lease")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, handle)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

// A lease granted is held until Release, not until Acquire's context ends: a run that
// is stopping its gang (its context cancelled by the signal) still uses the GPUs.
func TestLeaseOutlivesItsContext(t *testing.T) {
	closed := make(chan struct{})
	socket := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client hang up
		fmt.Fprintln(w, `{"gpus":[[0]]}`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(closed)
	})
	ctx, cancel := context.WithCancel(context.Background())
	lease, err := Acquire(ctx, socket, Request{Job: "j", Secret: "s", Workers: 1, GPUsPerWorker: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-closed:
		t.Fatal("the lease ended with Acquire's context")
	case <-time.After(300 * time.Millisecond):
	}
	lease.Release()
	lease.Release()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still holds the lease 10s after Release")
	}
}
