package cli

import (
	"bufio"
	"context"
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
	"github.com/trainyard/trainyard/internal/server"
)

// withDashboard returns the server's handler: the API's paths (/api/, /metrics,
// /healthz) go to api, every other path to the dashboard (ui, given its backend here),
// behind the same Host check. The dashboard reaches the API in process, through an
// in-memory listener that ends with ctx. The dashboard samples the machine (its GPUs'
// use) until ctx ends.
func withDashboard(ctx context.Context, api http.Handler, ui dashboard.Config, hostOpts auth.Options, log *slog.Logger) (http.Handler, error) {
	mem := newMemListener()
	inner := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = inner.Serve(mem) }()
	context.AfterFunc(ctx, func() { _ = inner.Close() })
	// In process nobody can stand in for the API, so its client sends the token itself.
	ui.Backend = client.New("http://127.0.0.1", ui.Token, client.WithDialer(mem.dial), client.WithBearer())
	ui.Logger = log
	h, err := dashboard.New(ui)
	if err != nil {
		_ = inner.Close()
		return nil, err
	}
	go h.Sample(ctx, 0)
	pages := server.LimitBodyRate(server.BodyRate{}, auth.HostCheck(hostOpts, h)) // its forms' bodies keep a pace too
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/api/") || p == "/metrics" || p == auth.HealthPath {
			api.ServeHTTP(w, r)
			return
		}
		pages.ServeHTTP(w, r)
	}), nil
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
http://127.0.0.1:8265/, signed in with 'trainyard open').

Signing in: this command prints a one-time sign-in link (it works once, within 2
minutes) and another each time you press Enter in its terminal; the page then keeps an
HttpOnly session cookie, named for its port, that ends when you sign out, after 12 hours,
or when the command stops. With --tls-cert the sign-in page also takes the dashboard's
token, made at the first start and kept, as the server keeps its own, in --token-file
(mode 0600, default ~/.config/trainyard/dashboard-token): the same at every start. It
never prints a token, nor asks for one over plain HTTP. Listening elsewhere than
on loopback without --tls-cert is warned about: links and sessions would cross the
network in clear text.`

func newDashboardCommand(g *globals) *cobra.Command {
	var (
		opts dashboardOptions
		kube kubeOptions
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
				return serveDashboard(cmd.Context(), g, src, "namespace "+c.Namespace, opts, false)
			}
			storage := jobspec.DefaultStoragePath
			if len(args) == 1 {
				storage = args[0]
			}
			dir, err := storageFolder(storage)
			if err != nil {
				return usageError(fmt.Errorf("storage path: %w", err))
			}
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return usageError(fmt.Errorf("storage path %s is not a folder: give the folder that holds your runs (trainyard run --storage-path)", dir))
			}
			return serveDashboard(cmd.Context(), g, &runs.Source{Storage: dir}, dir, opts, true)
		},
	}
	opts.bind(cmd)
	kube.bind(cmd.Flags())
	return cmd
}

// dashboardOptions are the flags of 'trainyard dashboard' that say where it listens.
type dashboardOptions struct {
	address, tlsCert, tlsKey, tokenFile string
}

func (o *dashboardOptions) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.address, "address", "127.0.0.1:8266", "host:port to listen on (loopback unless you need otherwise)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate to serve https with (with --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.tokenFile, "token-file", "", "file of this dashboard's token, which signs in over https, made at the first start "+
		"and kept (mode 0600; default $"+auth.EnvDashboardTokenFile+", else ~/.config/trainyard/dashboard-token)")
	cmd.MarkFlagsRequiredTogether("tls-cert", "tls-key")
}

// dashboardToken loads the dashboard's token, making its file at the first start, as the
// server keeps its own (auth.LoadOrCreate): the same token at every start.
func dashboardToken(tokenFile string) (path, token string, err error) {
	path = tokenFile
	if path == "" {
		if path, err = auth.DefaultDashboardTokenPath(); err != nil {
			return "", "", err
		}
	}
	if token, err = auth.LoadOrCreate(path); err != nil {
		return "", "", fmt.Errorf("the dashboard's token: %w", err)
	}
	return path, token, nil
}

// serveDashboard serves the dashboard of src (whose jobs are at place) until SIGINT or
// SIGTERM. It prints a one-time sign-in link, and another for each line read from
// standard input (Enter in its terminal); it never prints or asks for a token.
func serveDashboard(ctx context.Context, g *globals, src dashboard.Backend, place string, opts dashboardOptions, readOnly bool) error {
	log := g.logger()
	warning, err := auth.CheckListen(opts.address, opts.tlsCert != "")
	if err != nil {
		return usageError(fmt.Errorf("--address: %w", err))
	}
	hs, ln, err := listen(nil, serverOptions{address: opts.address, tlsCert: opts.tlsCert, tlsKey: opts.tlsKey}, log)
	if err != nil {
		return usageError(err)
	}
	tokenPath, token, err := dashboardToken(opts.tokenFile)
	if err != nil {
		ln.Close()
		return failed(err)
	}
	signIns := auth.NewSignIns(nil)
	ui, err := dashboard.New(dashboard.Config{Backend: src, Logger: log, ReadOnly: readOnly, Place: place, SignIns: signIns,
		Token: token, TokenHelp: "It is in " + tokenPath + ".",
		CookieName: dashboard.CookieName(portOf(ln)), SignInHelp: localSignInHelp})
	if err != nil {
		ln.Close()
		return failed(err)
	}
	if warning != "" {
		log.Warn(strings.Replace(warning, "the token travels", "sign-in links and sessions travel", 1))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go ui.Sample(ctx, 0)
	hs.Handler = server.LimitBodyRate(server.BodyRate{}, auth.HostCheck(auth.Options{ListenAddr: ln.Addr().String()}, ui))
	scheme := map[bool]string{false: "http", true: "https"}[opts.tlsCert != ""]
	base := scheme + "://" + ln.Addr().String()
	fmt.Fprintf(g.io.Out, "trainyard dashboard of %s on %s/\n", place, base)
	if opts.tlsCert != "" {
		fmt.Fprintf(g.io.Out, "  over https its sign-in page also takes the token kept in %s\n", tokenPath)
	}
	printLinks(ctx, g, base, signIns)
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

// localSignInHelp tells the sign-in page of 'trainyard dashboard' how to get a link.
const localSignInHelp = "Press Enter in the terminal where 'trainyard dashboard' runs: it prints a new link."

// printLinks prints a sign-in link, then another for every line read from standard input
// until ctx ends or the input does.
func printLinks(ctx context.Context, g *globals, base string, signIns *auth.SignIns) {
	link := func() {
		l := signIns.Link()
		fmt.Fprintf(g.io.Out, "  sign in: %s%s\n  (works once, until %s; press Enter for another link)\n", base, l.Path,
			l.Expires.Local().Format(time.TimeOnly))
	}
	link()
	if g.io.In == nil {
		return
	}
	go func() {
		sc := bufio.NewScanner(g.io.In)
		for sc.Scan() && ctx.Err() == nil {
			link()
		}
	}()
}
