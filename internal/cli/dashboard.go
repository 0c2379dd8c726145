package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/dashboard"
	"github.com/trainyard/trainyard/internal/dashboard/cluster"
	"github.com/trainyard/trainyard/internal/dashboard/runs"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// withDashboard returns the server's handler: the API's paths (/api/, /metrics,
// /healthz) go to api, every other path to the dashboard, behind the same Host check.
// The dashboard reaches the API in process, through an in-memory listener that stop
// closes. The dashboard samples the machine (its GPUs' use) until ctx ends.
func withDashboard(ctx context.Context, api http.Handler, token string, hostOpts auth.Options, log *slog.Logger) (http.Handler, func(), error) {
	mem := newMemListener()
	inner := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = inner.Serve(mem) }()
	c := client.New("http://127.0.0.1", token, client.WithDialer(mem.dial), client.WithBearer()) // in process: nobody can stand in
	ui, err := dashboard.New(dashboard.Config{Backend: c, Token: token, Logger: log})
	if err != nil {
		_ = inner.Close()
		return nil, nil, err
	}
	go ui.Sample(ctx, 0)
	pages := auth.HostCheck(hostOpts, ui)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/api/") || p == "/metrics" || p == auth.HealthPath {
			api.ServeHTTP(w, r)
			return
		}
		pages.ServeHTTP(w, r)
	})
	return h, func() { _ = inner.Close() }, nil
}

// memListener is a net.Listener of in-memory connections (net.Pipe).
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial connects to the listener.
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, errors.New("the server is shutting down")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "in-process" }

const dashboardLong = `Serve the dashboard of the local runs in a storage path (what 'trainyard run' writes:
default --storage-path), read-only, on localhost: the runs with their status, progress
and last metrics, each run's attempts and ranks, its log (followed while it runs), its
metric curves, comparisons of runs, and this machine's GPUs.

With --kube, serve the dashboard of a cluster's TrainJobs instead (the namespace of
--kubeconfig's context, or -n), through the kubeconfig like kubectl proxy: each job's
worker pods, events and conditions, its logs from the pods, and the cluster's GPUs,
CPU and memory; Stop suspends a job (as 'trainyard stop --kube'). Curves come from the
run folder when this machine mounts the storage volume at the same path; otherwise they
start with the last metrics the operator records, while the dashboard runs.

The job server serves the same dashboard on its own port ('trainyard server', then
http://127.0.0.1:8265/). This command makes a new token for each start and prints it:
sign in with it once; the page keeps an HttpOnly session cookie.`

func newDashboardCommand(g *globals) *cobra.Command {
	var (
		address string
		kube    kubeOptions
	)
	cmd := &cobra.Command{
		Use:   "dashboard [STORAGE PATH]",
		Short: "Serve the web dashboard of local runs, or of a cluster's TrainJobs (--kube)",
		Long:  dashboardLong,
		Example: `  trainyard dashboard
  trainyard dashboard ~/experiments --address 127.0.0.1:9000
  trainyard dashboard --kube -n research`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				if len(args) > 0 {
					return usageError(fmt.Errorf("dashboard --kube shows a cluster's TrainJobs: give no storage path (%s)", args[0]))
				}
				c, err := kube.connect(g)
				if err != nil {
					return err
				}
				src := &cluster.Source{Cluster: c}
				return serveDashboard(cmd.Context(), g, src, "namespace "+c.Namespace, address, false)
			}
			storage := jobspec.DefaultStoragePath
			if len(args) == 1 {
				storage = args[0]
			}
			dir, err := expandHome(storage)
			if err != nil {
				return usageError(fmt.Errorf("storage path: %w", err))
			}
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return usageError(fmt.Errorf("storage path %s is not a folder: give the folder that holds your runs (trainyard run --storage-path)", dir))
			}
			return serveDashboard(cmd.Context(), g, &runs.Source{Storage: dir}, dir, address, true)
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:8266", "host:port to listen on (loopback unless you need otherwise)")
	kube.bind(cmd.Flags())
	return cmd
}

// serveDashboard serves the dashboard of src (whose jobs are at place) until SIGINT or
// SIGTERM.
func serveDashboard(ctx context.Context, g *globals, src dashboard.Backend, place, address string, readOnly bool) error {
	log := g.logger()
	token, err := randomToken()
	if err != nil {
		return failed(err)
	}
	ui, err := dashboard.New(dashboard.Config{Backend: src, Token: token, Logger: log, ReadOnly: readOnly, Place: place})
	if err != nil {
		return failed(err)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return usageError(fmt.Errorf("--address %s: %w", address, err))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go ui.Sample(ctx, 0)
	hs := &http.Server{Handler: auth.HostCheck(auth.Options{ListenAddr: ln.Addr().String()}, ui),
		ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(g.io.Out, "trainyard dashboard of %s on http://%s/\n  sign in with the token %s\n", place, ln.Addr(), token)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return failed(err)
	}
	return nil
}

// randomToken returns 32 random bytes in hex.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
