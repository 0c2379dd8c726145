package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/dashboard"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/server"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/units"
	"github.com/trainyard/trainyard/internal/upload"
)

const serverLong = `Run the job server: it takes jobs from 'trainyard submit' and from Ray's job clients
('ray job submit', Ray's JobSubmissionClient, KubeRay) and runs them on this machine's
GPUs, each under its own 'trainyard run', which outlives the server: stop or restart the
server and running jobs go on; a restarted server finds them again.

Every request needs the server's token. It is made at the first start and kept in
--token-file (default $TRAINYARD_TOKEN_FILE, else ~/.config/trainyard/token, mode 0600),
where the CLI on this machine finds it; the server adds the address it listens on to
<token file>.servers, and the CLI uses the token it finds by itself only for those
addresses. The trainyard CLI never sends the token: the server first proves that it
holds it (an HMAC of a fresh nonce and of the address the connection arrived at), then
the CLI signs each request with a key derived from it, so a program that stands in for
the server on its port learns nothing, a relay on another port gets no session (a port
forward must keep the address and port: ssh -L 8265:127.0.0.1:8265), and one on the path
can neither replay nor change a request. Ray's clients and curl send the token
itself ("Authorization: Bearer <token>", as Ray's protocol has it). The server listens
on loopback unless told otherwise; listening elsewhere without --tls-cert/--tls-key
prints a warning. Requests must name the server in Host (localhost, its address, or an
--allow-host), which keeps web pages out (DNS rebinding).

The dashboard is on the same port, at / (http://127.0.0.1:8265/): sign in with a
one-time link from 'trainyard open' (its code comes sealed to the CLI's session; the
token is never typed into a page served over plain HTTP; over TLS the page also takes
it, five wrong tries a minute per address), then see the jobs, a job's attempts, live
log and metric curves, compare runs, watch the GPUs, and stop jobs. The session cookie
(HttpOnly, SameSite=Strict, named for the port) ends when you sign out, after 12 hours,
or when the server restarts.

A job may lease GPUs for a gang of its own: a Ray Train script run as one process (a Ray
job's entrypoint, or 'trainyard submit -- python3 train.py') is Ray's driver, and its
TorchTrainer.fit() asks the server for its gang's GPUs, waiting in the queue like any job.

Jobs wait in the queue by priority, then in submit order. With --preemption
lower-priority (the default) a job that fits only once some running jobs of lower
priority are gone preempts them, as few as it needs (the lowest priority, then the most
recently started, first): each one's supervisor gets SIGTERM, its ranks get the
preemption notice and the job's grace period (terminationGracePeriodSeconds, 30 s by
default) to save a checkpoint, and the job goes back to the queue, to resume from its
latest checkpoint once it fits again; 'trainyard list' and 'get' count its preemptions
apart from its restarts, which they use none of. --preemption never lets running jobs
end first.

An elastic job (--workers MIN:MAX, workers: {min, max} in a job file) starts with MAX
workers when they fit; otherwise with as many as fit, once at least MIN do and it has
waited --elastic-settle for more. When room becomes free and no job waits, a running
elastic job below MAX grows into it at its next committed checkpoint ("grew from 2 to 4
workers: GPUs 2,3 free"); a job of higher priority shrinks it toward MIN (its ranks get
the preemption notice and save) before it preempts anything whole. A resize is no
restart; the ranks see the new WORLD_SIZE and TRAINYARD_PREVIOUS_WORLD_SIZE.

With --prestart the server keeps the next job's Pythons warm, as Ray keeps a pool of
started workers: 5 s after a job starts, it starts one Python per rank of a job shaped
like it, which imports torch and waits. The next job's ranks run on them when they fit
(the same Python and flags, the same ranks, the same variables read at import such as
OMP_NUM_THREADS and PYTHONPATH; the GPUs may differ), so they skip the import, most of
a rank's start; ranks that do not fit start afresh. The Pythons run as the server,
without any job's secrets, 117 MB of anonymous memory each with torch 1.13 on CPU.
The job's log says "attempt 1: 2 of 2 rank(s) run on prestarted Pythons", or why a rank
starts afresh. With --prestart-shapes N, up to N such sets of Pythons wait at once, one
for each of the N most recent shapes of job (the Python and its flags, the workers and
processes, the variables read at import); a job of another shape starts afresh and
leaves them waiting.

Jobs get the GPUs in CUDA_VISIBLE_DEVICES (all the GPUs nvidia-smi finds when it is not
set), all CPU cores and all memory. The server keeps its jobs in <state dir>/jobs.db;
one server at a time can use a state folder, and no job may keep its runs in it. It
logs every submit, stop and delete, and every request it refuses for want of the
right token or Host, with the client's address. It logs what it does on stderr (at
--log-level info unless told otherwise). SIGINT or SIGTERM stops the server
gracefully; running jobs keep running.

Packages that Ray's clients upload (working_dir) are unpacked into a folder of each job's
own in the state folder; they and those folders may take at most --upload-quota, and
uploads and submissions past it are refused until ended jobs are deleted. A request
body must come at 16 KiB/s on average after 30 seconds, or the server stops reading it.`

const serverExample = `  trainyard server
  CUDA_VISIBLE_DEVICES=0,1 trainyard server --storage-path /data/runs
  trainyard server --address 0.0.0.0:8265 --tls-cert cert.pem --tls-key key.pem \
      --allow-host gpu-box.example.com`

// Defaults of the server's folders; "~" is the home folder.
const (
	defaultStateDir = "~/.local/share/trainyard"
	defaultAddress  = "127.0.0.1:8265"
	// defaultUploadQuota is server.DefaultUploadQuota as the flag writes it.
	defaultUploadQuota = "20Gi"
)

// serverOptions are the flags of server.
type serverOptions struct {
	address    string
	tlsCert    string
	tlsKey     string
	allowHosts []string
	stateDir   string
	storage    string
	tokenFile  string
	quota      string // --upload-quota, a quantity such as 20Gi
	quotaBytes int64  // quota, parsed by check
	preemption string // --preemption
	// preemptionPolicy is preemption, parsed by check.
	preemptionPolicy scheduler.PreemptionPolicy
	// elasticSettle is --elastic-settle.
	elasticSettle  time.Duration
	prestart       bool // --prestart
	prestartShapes int  // --prestart-shapes
}

func newServerCommand(g *globals) *cobra.Command {
	var opts serverOptions
	cmd := &cobra.Command{
		Use:     "server",
		Short:   "Run the job server: the Ray Jobs API and trainyard's own API, on this machine's GPUs",
		Long:    serverLong,
		Example: serverExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sg := *g
			if !cmd.Flags().Changed("log-level") {
				sg.logLevel = "info" // a server says what it does
			}
			return runServer(cmd.Context(), &sg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.address, "address", defaultAddress, "host:port to listen on")
	f.StringVar(&opts.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve https with; needs --tls-key")
	f.StringVar(&opts.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringArrayVar(&opts.allowHosts, "allow-host", nil, "also answer requests whose Host is this name (repeatable; * for any)")
	f.StringVar(&opts.stateDir, "state-dir", defaultStateDir, "folder of the server's state: jobs.db, specs, uploaded packages")
	f.StringVar(&opts.storage, "storage-path", jobspec.DefaultStoragePath, "folder that holds the runs of jobs that do not name one, or a bucket: s3://bucket/prefix (docs/storage.md)")
	f.StringVar(&opts.tokenFile, "token-file", "", "file of the server's token, made at the first start (default $"+
		auth.EnvTokenFile+", else ~/.config/trainyard/token)")
	f.StringVar(&opts.quota, "upload-quota", defaultUploadQuota, "most disk that uploaded packages (Ray's working_dir) and the "+
		"working folders unpacked from them may take in --state-dir; uploads and submissions past it are refused until ended jobs are deleted")
	f.StringVar(&opts.preemption, "preemption", string(scheduler.PreemptLowerPriority), "whether a waiting job may preempt running "+
		"jobs: lower-priority (those of lower priority are stopped, with their grace period to save a checkpoint, and go back to "+
		"the queue to resume from it) or never")
	f.DurationVar(&opts.elasticSettle, "elastic-settle", 10*time.Second, "how long an elastic job (--workers MIN:MAX) that fits "+
		"with at least MIN but fewer than MAX workers waits for more room before it starts with what fits (0: at once)")
	f.BoolVar(&opts.prestart, "prestart", false, "keep the next job's Pythons warm: a few seconds after a job starts, start one "+
		"Python per rank shaped like it, with torch imported, and run the next job's ranks on them when they fit (the same Python, "+
		"flags, ranks and environment)")
	f.IntVar(&opts.prestartShapes, "prestart-shapes", 1, "with --prestart, how many sets of warm Pythons wait at once, each for "+
		"one of the most recent shapes of job (its Python and flags, workers, processes and import-time variables); each holds "+
		"memory for a Python per rank")
	return cmd
}

// check refuses flags that cannot work, before anything starts; it returns the warning
// to print for listening elsewhere than loopback without TLS.
func (o *serverOptions) check() (warning string, err error) {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return "", errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	for _, h := range o.allowHosts {
		if !validAllowHost(h) {
			return "", fmt.Errorf("--allow-host %q: give a host name or IP address (a port is ignored), such as gpu-box.example.com, or *", h)
		}
	}
	if o.quotaBytes, err = parseQuota(o.quota); err != nil {
		return "", err
	}
	if o.stateDir, err = expandHome(o.stateDir); err != nil {
		return "", err
	}
	if err := o.checkStorage(); err != nil {
		return "", err
	}
	if o.preemptionPolicy, err = scheduler.ParsePreemptionPolicy(o.preemption); err != nil {
		return "", fmt.Errorf("--preemption: %w", err)
	}
	if o.elasticSettle < 0 {
		return "", fmt.Errorf("--elastic-settle %s: give a duration of 0 or more, such as 10s", o.elasticSettle)
	}
	if o.prestartShapes < 1 || o.prestartShapes > maxPrestartShapes {
		return "", fmt.Errorf("--prestart-shapes %d: give a number from 1 to %d", o.prestartShapes, maxPrestartShapes)
	}
	if o.prestartShapes > 1 && !o.prestart {
		return "", fmt.Errorf("--prestart-shapes %d keeps Pythons warm only with --prestart: give both", o.prestartShapes)
	}
	return auth.CheckListen(o.address, o.tlsCert != "")
}

// checkStorage checks --storage-path: a folder only root and this user can change, apart
// from --state-dir, or a bucket (s3://), which each job checks with its own credentials.
func (o *serverOptions) checkStorage() (err error) {
	if err := jobspec.CheckStoragePath(o.storage); err != nil {
		return fmt.Errorf("--storage-path: %w", err)
	}
	if jobspec.IsURI(o.storage) {
		return nil // a bucket: each job checks it (credentials are the job's)
	}
	if o.storage, err = expandHome(o.storage); err != nil {
		return err
	}
	if err := rundir.CheckStorage(o.storage); err != nil {
		return fmt.Errorf("--storage-path: %w", err)
	}
	if rel, err := filepath.Rel(o.stateDir, o.storage); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return fmt.Errorf("--storage-path %s is inside --state-dir %s, where the server keeps its own files, and the server "+
			"refuses jobs that keep their runs there; give folders apart", o.storage, o.stateDir)
	}
	return nil
}

// maxPrestartShapes bounds --prestart-shapes: each shape holds a Python per rank.
const maxPrestartShapes = 16

// parseQuota reads --upload-quota: a size in bytes, with a unit such as Gi or G; ""
// is 0, the server's default.
func parseQuota(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("--upload-quota %q: give a size in bytes, such as 20Gi or 500Mi", s)
	}
	return q.Value(), nil
}

// validAllowHost reports whether h is a host name or IP address, with or without a port,
// or "*".
func validAllowHost(h string) bool {
	if h == "*" {
		return true
	}
	if h == "" || strings.ContainsAny(h, "/\\@ \t*?#") {
		return false // a URL, say
	}
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return h != ""
}

// expandHome makes a path that starts with "~" one under the home folder, and absolute.
func expandHome(p string) (string, error) {
	if rest, ok := strings.CutPrefix(p, "~"); ok && (rest == "" || rest[0] == '/') {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the home folder for %s: %w", p, err)
		}
		p = filepath.Join(home, rest)
	}
	return filepath.Abs(p)
}

// storageFolder is the folder on this machine that holds the runs of the storage path p:
// p with "~" expanded, or a bucket's staging folder (s3://: jobspec.LocalStorage).
func storageFolder(p string) (string, error) {
	if jobspec.InBucket(p) {
		return jobspec.LocalStorage(p), nil
	}
	return expandHome(p)
}

// runServer starts everything and serves until SIGINT or SIGTERM.
func runServer(ctx context.Context, g *globals, opts serverOptions) error {
	warning, err := opts.check()
	if err != nil {
		return usageError(err)
	}
	log := g.logger()
	tokenPath, token, err := serverToken(opts.tokenFile)
	if err != nil {
		return usageError(err)
	}
	st, err := openState(opts.stateDir)
	if err != nil {
		return failed(err)
	}
	defer st.Close()
	node, inv, err := discoverNode(ctx)
	if err != nil {
		return failed(err)
	}
	signIns := auth.NewSignIns(nil)
	svc, api, err := newEngine(st, node, inv, token, signIns, opts, log)
	if err != nil {
		return failed(err)
	}
	hs, ln, err := listen(nil, opts, log)
	if err != nil {
		return usageError(err)
	}
	ui := dashboard.Config{Token: token, SignIns: signIns, CookieName: dashboard.CookieName(portOf(ln)), SignInHelp: serverSignInHelp}
	hs.Handler, err = withDashboard(ctx, api.Handler(), ui, auth.Options{ListenAddr: opts.address, AllowHosts: opts.allowHosts}, log)
	if err != nil {
		ln.Close()
		return failed(err)
	}
	for _, w := range startWarnings(warning, opts, os.Geteuid()) {
		log.Warn(w)
	}
	if err := auth.RecordServer(tokenPath, recordedAddr(opts.address, ln)); err != nil {
		log.Warn("the CLI on this machine will not send the token to this server by itself", "err", err)
	}
	printBanner(g, ln, opts, tokenPath, inv, node)
	return failed(serve(ctx, log, svc, hs, ln))
}

// startWarnings are the warnings the server logs when it starts: listenWarning (from
// auth.CheckListen), running as root (euid 0), and --allow-host '*'.
func startWarnings(listenWarning string, opts serverOptions, euid int) []string {
	var out []string
	if listenWarning != "" {
		out = append(out, listenWarning)
	}
	if euid == 0 {
		out = append(out, "the server runs as root, so every job it runs does too, with full access to this machine; "+
			"run it as an unprivileged user")
	}
	if slices.Contains(opts.allowHosts, "*") {
		out = append(out, "--allow-host '*' turns off the Host header check that defends against DNS rebinding: "+
			"a web page whose name points at this machine can send requests to the server, which then only the token "+
			"stops; name the hosts to allow instead")
	}
	return out
}

// recordedAddr is the address the server records beside its token: the host it was
// given, "" for all interfaces, with the port it got.
func recordedAddr(address string, ln net.Listener) string {
	host, _, _ := net.SplitHostPort(address)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port)
}

// serverToken loads the token, making the token file at the first start.
func serverToken(tokenFile string) (path, token string, err error) {
	path = tokenFile
	if path == "" {
		if path, err = auth.DefaultTokenPath(); err != nil {
			return "", "", err
		}
	}
	token, err = auth.LoadOrCreate(path)
	return path, token, err
}

// openState opens the state file; a state folder in use by another server is a usage
// error.
func openState(dir string) (*store.Store, error) {
	path := filepath.Join(dir, "jobs.db")
	st, err := store.Open(path, store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, usageError(fmt.Errorf("another trainyard server uses the state folder %s (%s is locked): stop it, or give this one --state-dir", dir, path))
	}
	if err != nil {
		return nil, fmt.Errorf("open the server's state: %w", err)
	}
	return st, nil
}

// discoverNode finds what this machine offers to jobs: the GPUs CUDA_VISIBLE_DEVICES
// allows, every CPU core and all the memory.
func discoverNode(ctx context.Context) (scheduler.Node, device.Inventory, error) {
	inv, err := discoverGPUs(ctx)
	if err != nil {
		return scheduler.Node{}, inv, err
	}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return scheduler.Node{}, inv, err
	}
	node := scheduler.Node{MilliCPU: int64(runtime.NumCPU()) * 1000, MemoryBytes: mem}
	for _, gpu := range inv.GPUs {
		node.GPUs = append(node.GPUs, gpu.Index)
	}
	return node, inv, nil
}

// memTotal reads MemTotal from a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read the machine's memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read the machine's memory: %s: MemTotal %q: %w", path, rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read the machine's memory: %w", err)
	}
	return 0, fmt.Errorf("read the machine's memory: %s has no MemTotal", path)
}

// newEngine builds the job engine and the HTTP API over it, both on the same node.
func newEngine(st *store.Store, node scheduler.Node, inv device.Inventory, token string, signIns *auth.SignIns,
	opts serverOptions, log *slog.Logger) (*jobs.Service, *server.Server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find the trainyard binary that supervises jobs: %w", err)
	}
	svc, err := jobs.New(jobs.Config{Store: st, Node: node, StateDir: opts.stateDir, Binary: self, Logger: log,
		LeaseKey: []byte(token), LeaseSocket: filepath.Join(opts.stateDir, "lease.sock"), Preemption: opts.preemptionPolicy,
		ElasticSettle: opts.elasticSettle, Prestart: opts.prestart,
		PrestartShapes: opts.prestartShapes, Deleted: deleteClusterGangs(log)})
	if err != nil {
		return nil, nil, err
	}
	pkgs, err := upload.NewStore(filepath.Join(opts.stateDir, "packages"))
	if err != nil {
		return nil, nil, err
	}
	nc := server.NodeConfig{Resources: node}
	if len(inv.GPUs) > 0 {
		nc.Utilization = gpuUtilization(node.GPUs)
	}
	api, err := server.New(server.Config{Jobs: svc, Token: token, Packages: pkgs, StateDir: opts.stateDir, UploadQuota: opts.quotaBytes,
		StoragePath: opts.storage, Node: nc, Version: Version, Logger: log, SignIns: signIns,
		Auth: auth.Options{ListenAddr: opts.address, AllowHosts: opts.allowHosts}})
	return svc, api, err
}

// gpuUtilization measures the current use of the server's GPUs with nvidia-smi.
func gpuUtilization(indices []int) func(context.Context) ([]server.GPUUtilization, error) {
	return func(ctx context.Context) ([]server.GPUUtilization, error) {
		inv, err := device.DiscoverWith(ctx, device.Options{Timeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		var out []server.GPUUtilization
		for _, gpu := range inv.GPUs {
			if !slices.Contains(indices, gpu.Index) || gpu.UtilizationPercent < 0 {
				continue
			}
			out = append(out, server.GPUUtilization{Index: gpu.Index, Percent: float64(gpu.UtilizationPercent),
				MemoryUsedBytes: gpu.MemoryUsedMiB << 20, MemoryTotalBytes: gpu.MemoryMiB << 20})
		}
		return out, nil
	}
}

// listen opens the listener and the HTTP server, with TLS when asked; a bad certificate
// or an address in use is reported before anything is served.
func listen(h http.Handler, opts serverOptions, log *slog.Logger) (*http.Server, net.Listener, error) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if opts.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(opts.tlsCert, opts.tlsKey)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", opts.address)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", opts.address, err)
	}
	if hs.TLSConfig != nil {
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	return hs, ln, nil
}

// printBanner says where the server listens, where its token is and what it runs jobs on.
func printBanner(g *globals, ln net.Listener, opts serverOptions, tokenPath string, inv device.Inventory, node scheduler.Node) {
	scheme := "http"
	if opts.tlsCert != "" {
		scheme = "https"
	}
	gpus := fmt.Sprintf("none (%s)", strings.TrimPrefix(inv.Source, "none: "))
	if len(inv.GPUs) > 0 {
		ids := make([]string, len(node.GPUs))
		for i, idx := range node.GPUs {
			ids[i] = strconv.Itoa(idx)
		}
		gpus = fmt.Sprintf("%d (%s), from %s", len(inv.GPUs), strings.Join(ids, ","), inv.Source)
	}
	fmt.Fprintf(g.io.Out, "trainyard server %s listening on %s://%s\n", Version, scheme, listenAddr(opts.address, ln))
	fmt.Fprintf(g.io.Out, "  token file:    %s\n", tokenPath)
	fmt.Fprintf(g.io.Out, "  dashboard:     %s://%s/ (sign in with a link from 'trainyard open')\n", scheme, listenAddr(opts.address, ln))
	fmt.Fprintf(g.io.Out, "  GPUs:          %s\n", gpus)
	fmt.Fprintf(g.io.Out, "  CPUs, memory:  %s cores, %s\n", units.Cores(node.MilliCPU), units.BytesIEC(node.MemoryBytes))
	fmt.Fprintf(g.io.Out, "  state folder:  %s\n", opts.stateDir)
	fmt.Fprintf(g.io.Out, "  storage path:  %s\n", opts.storage)
}

// serverSignInHelp tells the sign-in page of the server's dashboard how to get a link.
const serverSignInHelp = "Run 'trainyard open' where the server's token is (on the server's machine it finds it by itself; " +
	"elsewhere give it TRAINYARD_TOKEN and --address), and open the link it prints."

// portOf returns the port a listener got.
func portOf(ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// listenAddr writes the address the server listens on: the host given (0.0.0.0 for
// none) with the port it got.
func listenAddr(address string, ln net.Listener) string {
	host, _, _ := net.SplitHostPort(address)
	if host == "" {
		host = "0.0.0.0"
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port)
}

// serve runs the job engine and the HTTP server until SIGINT or SIGTERM, or until one
// of them fails, then shuts the HTTP server down gracefully. Jobs keep running.
func serve(ctx context.Context, log *slog.Logger, svc *jobs.Service, hs *http.Server, ln net.Listener) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	runCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	engine := make(chan error, 1)
	go func() { engine <- svc.Run(runCtx) }()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	var err error
	engineDone := false
	select {
	case <-ctx.Done():
		log.Info("shutting down; running jobs keep running")
	case err = <-served:
		err = fmt.Errorf("serve: %w", err)
	case err = <-engine:
		engineDone = true
		if err == nil {
			err = errors.New("stopped")
		}
		err = fmt.Errorf("job engine: %w", err)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := hs.Shutdown(shutdown); serr != nil {
		log.Warn("shut down the HTTP server", "err", serr)
	}
	stopEngine()
	if !engineDone {
		if eerr := <-engine; eerr != nil && err == nil {
			err = fmt.Errorf("job engine: %w", eerr)
		}
	}
	return err
}
