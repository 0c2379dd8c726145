// Command operator benchmarks the Kubernetes operator against a real test API server
// (kube-apiserver and etcd, started with controller-runtime's envtest), with no kubelet:
// the benchmark sets the pods' status as a kubelet would. With -kcm the real
// kube-controller-manager runs beside them at its default flags (garbage collector,
// EndpointSlices, the Job controller, ...).
//
//   - phase 1: -jobs TrainJobs of -workers workers are created from -clients goroutines;
//     timed until every attempt-1 Service and every worker's pod exists;
//   - then every pod is set Running (timed apart), so that the operator holds
//     -jobs × -workers running pods in its cache, as on a real cluster;
//   - phase 2: one worker of each job is set Failed (exit code 1); timed until every
//     attempt-2 Service and pod exists, and until attempt 1's Services and pods are gone;
//   - the peer, in the same run on the same API server before the operator starts: the
//     same Services and pods (rendered with workload.Render) created, restarted and
//     deleted straight from the benchmark's client, in a namespace of their own;
//   - with -kuberay, KubeRay's operator (at its defaults) making the pods of -jobs
//     RayClusters of a head and -workers-1 workers, after the peer: the peer.
//
// The operator runs as a process of its own (`trainyard operator`), so that its memory
// (VmRSS, VmHWM) is its own.
//
// Usage:
//
//	make build && go run ./bench/operator -jobs 1000 -workers 4 -kcm ./bin/kube-controller-manager-v1.37.1
//
// See bench/operator/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// config holds the command-line settings of a benchmark run.
type config struct {
	jobs        int           // TrainJobs
	workers     int           // workers per TrainJob
	clients     int           // goroutines that create and update objects
	assets      string        // folder holding kube-apiserver and etcd
	kcm         string        // kube-controller-manager binary, or "" to run none
	kuberay     string        // KubeRay's operator binary, or "" to run none
	kuberayCRDs string        // folder holding KubeRay's CRDs
	crds        string        // folder holding the TrainJob CRD
	trainyard   string        // the binary under test
	image       string        // the operator's --image
	operatorQPS float64       // 0: `trainyard operator` as built; else this benchmark's own child with this QPS
	cpuProfile  string        // with operatorQPS: the child writes a CPU profile of the operator here
	poll        time.Duration // how often a wait looks at what the benchmark's watches saw
	timeout     time.Duration // limit for the whole run
	dir         string        // parent of this run's folder
	markdown    string        // optional Markdown output file
	keep        bool          // keep this run's folder
	root        string        // this run's folder under dir
	binary      string        // the copy of trainyard under root
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		if err := runOperatorChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench/operator (operator child):", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/operator:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the trials and prints the report.
func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if err := cfg.prepare(); err != nil {
		return err
	}
	ctrllog.SetLogger(logr.Discard()) // the benchmark's own watches log nothing
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	info := describeMachine(ctx, cfg)
	res, err := measureAll(ctx, cfg)
	if err != nil {
		cfg.keep = true
		fmt.Fprintf(os.Stderr, "bench/operator: keeping %s (the operator's log is there)\n", cfg.root)
		return err
	}
	cfg.cleanup()
	info.loadAfter = host.LoadAverage()
	report := renderReport(cfg, info, res)
	fmt.Println()
	fmt.Print(report)
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write markdown summary: %w", err)
		}
	}
	return nil
}

// progress prints a line about what the benchmark does now, on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// defaultAssets is KUBEBUILDER_ASSETS, else the folder `make envtest-assets` fills.
func defaultAssets() string {
	if env := os.Getenv("KUBEBUILDER_ASSETS"); env != "" {
		return env
	}
	return filepath.Join("bin", "k8s-1.37.1")
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	cfg := &config{}
	fs.IntVar(&cfg.jobs, "jobs", 1000, "TrainJobs to create")
	fs.IntVar(&cfg.workers, "workers", 4, "workers per TrainJob (pods per attempt)")
	fs.IntVar(&cfg.clients, "clients", 16, "goroutines that create TrainJobs, pods and the peer's objects and set pod status")
	fs.StringVar(&cfg.assets, "assets", defaultAssets(), "folder holding kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, else ./bin/k8s-1.37.1)")
	fs.StringVar(&cfg.kcm, "kcm", "", "kube-controller-manager binary to run beside the API server at its default flags (e.g. ./bin/kube-controller-manager-v1.37.1); none if empty")
	fs.StringVar(&cfg.kuberay, "kuberay", "", "KubeRay's operator binary: measure it making the pods of -jobs RayClusters (a head and -workers-1 workers) as the peer; none if empty")
	fs.StringVar(&cfg.kuberayCRDs, "kuberay-crds", "", "with -kuberay: folder holding KubeRay's CRDs (ray-operator/config/crd/bases of its module)")
	fs.StringVar(&cfg.crds, "crds", filepath.Join("config", "crd", "bases"), "folder holding the TrainJob CRD")
	fs.StringVar(&cfg.trainyard, "trainyard", "./bin/trainyard", "trainyard binary whose `operator` command is measured (copied into the run's folder at start)")
	fs.StringVar(&cfg.image, "image", "ghcr.io/trainyard/trainyard:bench", "the operator's --image")
	fs.Float64Var(&cfg.operatorQPS, "operator-qps", 0, "0: run `trainyard operator` as built; else run the same operator.Run from this program's "+
		"own binary with this client QPS (-1: no client-side limit), to show what client-side throttling costs")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "with -operator-qps: write a CPU profile of the operator to this file (go tool pprof)")
	fs.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "how often a wait checks what the benchmark's watches saw")
	fs.DurationVar(&cfg.timeout, "timeout", 40*time.Minute, "limit for the whole run")
	fs.StringVar(&cfg.dir, "dir", os.TempDir(), "folder for the run's kubeconfig and the operator's log")
	fs.StringVar(&cfg.markdown, "markdown", "", "also write the summary as Markdown to this file")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run's folder (it is always kept after a failure)")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if cfg.cpuProfile != "" {
		if cfg.operatorQPS == 0 {
			return nil, errors.New("-cpuprofile needs -operator-qps (the operator then runs from this program's binary)")
		}
		abs, err := filepath.Abs(cfg.cpuProfile)
		if err != nil {
			return nil, err
		}
		cfg.cpuProfile = abs
	}
	if cfg.kuberay != "" && cfg.kuberayCRDs == "" {
		return nil, errors.New("-kuberay needs -kuberay-crds")
	}
	if fs.NArg() > 0 || cfg.jobs < 1 || cfg.workers < 1 || cfg.clients < 1 || cfg.poll <= 0 || cfg.timeout <= 0 {
		return nil, errors.New("usage: operator [-jobs N] [-workers N] [-clients N] [-assets DIR] [-trainyard BIN] [-operator-qps Q] [-markdown FILE]")
	}
	return cfg, nil
}

// prepare creates this run's folder and copies the binary into it, so that a rebuild
// during the run changes nothing, and checks the control plane's binaries.
func (c *config) prepare() error {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(c.assets, name)); err != nil || fi.IsDir() {
			return fmt.Errorf("-assets %s: no %s there (run `make envtest-assets`)", c.assets, name)
		}
	}
	if _, err := os.Stat(c.crds); err != nil {
		return fmt.Errorf("-crds: %w (run from the repository's root)", err)
	}
	for flag, path := range map[string]string{"-kcm": c.kcm, "-kuberay": c.kuberay, "-kuberay-crds": c.kuberayCRDs} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	root, err := os.MkdirTemp(c.dir, "trainyard-bench-operator-")
	if err != nil {
		return fmt.Errorf("create the run's folder: %w", err)
	}
	c.root = root
	if c.operatorQPS != 0 {
		if c.binary, err = os.Executable(); err != nil {
			return fmt.Errorf("find this program's binary: %w", err)
		}
		return nil
	}
	c.binary = filepath.Join(root, "trainyard")
	if err := host.CopyFile(c.trainyard, c.binary, 0o755); err != nil {
		return fmt.Errorf("-trainyard: %w", err)
	}
	return nil
}

// cleanup removes this run's folder unless it is to be kept.
func (c *config) cleanup() {
	if !c.keep {
		_ = os.RemoveAll(c.root)
	}
}
