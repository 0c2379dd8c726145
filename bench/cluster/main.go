// Command cluster benchmarks the operator on the real single-node test cluster
// (internal/testcluster; needs root and `make cluster-assets`), with real pods:
//
//   - submit to running: `trainyard submit --kube` of a 2-worker TrainJob until both worker
//     pods run, against the floor: the same headless Service and pods (rendered by the
//     operator's own code, without owner) created directly through the API, until both pods
//     run; alternated, -runs times each.
//
// With -inplace it measures restarts instead (issue 21; it replaced the default mode's
// earlier restart measurement, which waited for a recreated gang's pods): for gangs of each -workers size,
// a small DDP script (ddp.py, gloo, CPU only) and one rank killed, the time from the kill
// to every rank of the next attempt in the process group, for a restart in place, for
// the gang recreated by the operator (worker 1's `trainyard worker` killed), and for
// `trainyard run --workers W` on the host; the three alternate, -runs rounds per size.
//
// With -shrink it measures an elastic resize (issue 22): a 2:3 gang of one GPU per worker
// on the node's 4 GPUs (a pod holds the fourth) loses worker 1's pod while another pod of
// higher priority (which preempts nothing) waits for its GPU, so that its replacement
// cannot be scheduled; after the operator's elastic settle time (30 s) the gang goes on
// with workers 0 and 2, renumbered. Each trial times the loss, and the resize
// (status.workers 2), to both ranks of the next attempt in the process group, and says
// whether workers 0 and 2 kept their pods (in place). Then the waiting pod is deleted and
// the gang grows back into the GPU it frees: the trial times that, and the grow recorded
// (status.workers 0), to the 3 ranks of the grown attempt in the process group, and says
// whether workers 0 and 2 kept their pods through it.
//
// With -slices it measures a grow through Kueue's workload slices (issue 22): Kueue (with
// its ElasticJobsViaWorkloadSlices gate) and a ClusterQueue of 4 GPUs; a blocker in the
// queue holds 2 of them, so an elastic 1:2 gang of 2 GPUs per worker (Kueue's elastic-job
// annotation) is admitted with 1 worker and asks for more through a second slice. The
// blocker is released, and the trial times the gang's grow to its 4 ranks in the process
// group; it alternates with the peer, a 2-worker gang waiting in the same queue for the
// same quota, timed to its start (slices.go).
//
// With -gangs it measures gangs placed whole without a queue (issue 44): -gang-count gangs
// of 3 workers x 1 GPU made at once on the node's 4 GPUs, each running -gang-seconds, timed
// until all ended, with the operator's gang placement, in a Kueue queue (the peer), and
// with --gang-placement=off as main had it (gangs.go).
//
// With -rayapi it measures Ray's Jobs API served in the cluster (issue 40): a Ray Train
// script submitted as Ray's clients do, to its gang's ranks in the loop, against `trainyard
// submit --kube` of the same gang, and what a driver costs (rayapi.go).
//
// Usage:
//
//	sudo go run ./bench/cluster -assets ./bin -trainyard ./bin/trainyard [-runs 3]
//	sudo go run ./bench/cluster -assets ./bin -trainyard ./bin/trainyard -gangs [-gang-count 6 -gang-seconds 60]
//	sudo go run ./bench/cluster -assets ./bin -trainyard ./bin/trainyard -rayapi -runs 3
//	sudo go run ./bench/cluster -assets ./bin -trainyard ./bin/trainyard -inplace -workers 2,8,32 -runs 3
//	sudo go run ./bench/cluster -assets ./bin -trainyard ./bin/trainyard -shrink -runs 3
//	sudo go run ./bench/cluster -assets ./bin -trainyard ./bin/trainyard -slices -runs 3
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/testcluster"
	"github.com/trainyard/trainyard/internal/workload"
)

type bench struct {
	cl        *testcluster.Cluster
	trainyard string
	shared    string
}

func main() {
	assets := flag.String("assets", "bin", "folder of the cluster's binaries (make cluster-assets)")
	trainyard := flag.String("trainyard", "bin/trainyard", "the trainyard binary (its image is built from it)")
	runs := flag.Int("runs", 3, "trials of each measurement")
	inplace := flag.Bool("inplace", false, "measure restarts in place, recreated and local instead (issue 21)")
	workers := flag.String("workers", "2,8,32", "with -inplace: the gang sizes, comma-separated; SIZE:RUNS overrides -runs for one")
	script := flag.String("script", "bench/cluster/ddp.py", "with -inplace: the DDP script")
	until := flag.String("until", "", "with -inplace: start no trial after this time (RFC 3339), and report what was measured")
	noRecreate := flag.Bool("no-recreated", false, "with -inplace: measure in place and local only (recreation is slow, and shown before)")
	shrink := flag.Bool("shrink", false, "measure an elastic 2:3 gang that loses a worker for good instead (issue 22): -runs trials")
	slicesMode := flag.Bool("slices", false, "measure an elastic gang in a Kueue queue that grows through a workload slice when quota frees, "+
		"against a queued gang of that size started by the same quota, instead (issue 22): -runs trials of each")
	rayAPI := flag.Bool("rayapi", false, "measure Ray's Jobs API in the cluster against submit --kube instead (issue 40): -runs trials of each")
	gangs := flag.Bool("gangs", false, "measure gangs made together in no queue, against a Kueue queue and against no gang placement, instead (issue 44)")
	gangCount := flag.Int("gang-count", 6, "with -gangs: how many gangs of 3 workers x 1 GPU")
	gangSeconds := flag.Int("gang-seconds", 60, "with -gangs: how long each gang runs once all its workers do")
	flag.Parse()
	if *noRecreate {
		restartModes = []restartMode{inPlace, local}
	}
	sizes, err := parseSizes(*workers, *runs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/cluster: -workers:", err)
		os.Exit(2)
	}
	m := mode{runs: *runs}
	if *inplace {
		m.inplace, m.sizes, m.script = true, sizes, *script
	}
	if *shrink {
		m.shrink, m.script = true, *script
	}
	if *slicesMode {
		m.slices, m.script = true, *script
	}
	if *gangs {
		m.gangs, m.gangCount, m.gangSeconds = true, *gangCount, *gangSeconds
	}
	m.rayAPI = *rayAPI
	if *until != "" {
		if m.until, err = time.Parse(time.RFC3339, *until); err != nil {
			fmt.Fprintln(os.Stderr, "bench/cluster: -until:", err)
			os.Exit(2)
		}
	}
	if err := run(*assets, *trainyard, m); err != nil {
		fmt.Fprintln(os.Stderr, "bench/cluster:", err)
		os.Exit(1)
	}
}

// mode is what to measure: the default measurements, or with inplace the restarts of
// gangs of each size in sizes.
type mode struct {
	runs    int
	inplace bool
	shrink  bool
	slices  bool
	gangs   bool
	rayAPI  bool
	// gangCount gangs of gangSeconds each (-gangs).
	gangCount, gangSeconds int
	sizes                  []gangSize
	script                 string
	until                  time.Time
}

// gangSize is a gang size of -inplace and its number of rounds.
type gangSize struct{ workers, runs int }

// parseSizes parses -workers: "2,8,32:1" is 2 and 8 workers with runs rounds, 32 with one.
func parseSizes(s string, runs int) ([]gangSize, error) {
	var out []gangSize
	for _, f := range strings.Split(s, ",") {
		w, r, ok := strings.Cut(strings.TrimSpace(f), ":")
		g := gangSize{runs: runs}
		var err error
		if g.workers, err = strconv.Atoi(w); err != nil || g.workers < 2 {
			return nil, fmt.Errorf("%q is not a gang size of 2 or more", f)
		}
		if ok {
			if g.runs, err = strconv.Atoi(r); err != nil || g.runs < 1 {
				return nil, fmt.Errorf("%q: rounds must be 1 or more", f)
			}
		}
		out = append(out, g)
	}
	return out, nil
}

func run(assets, trainyard string, m mode) error {
	runs := m.runs
	assets, _ = filepath.Abs(assets)
	trainyard, _ = filepath.Abs(trainyard)
	images, err := testcluster.BuildImages(filepath.Join(assets, "images"), trainyard)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cl, err := testcluster.Start(ctx, testcluster.Config{Assets: assets, Root: "/tmp/trainyard-testcluster", Images: images, GPUs: 4})
	if err != nil {
		return err
	}
	defer cl.Stop()
	b := &bench{cl: cl, trainyard: trainyard, shared: "/tmp/trainyard-bench-shared"}
	_ = os.RemoveAll(b.shared)
	if m.slices || m.gangs { // before the operator, which looks for Kueue's Workloads when it starts
		ctrllog.SetLogger(logr.Discard()) // the controller-runtime clients of Kueue's objects log nothing here
		if err := cl.StartKueue(ctx, assets); err != nil {
			return err
		}
	}
	if out, err := b.cli("install", "--image", testcluster.TrainyardImage); err != nil {
		return fmt.Errorf("install: %v: %s", err, out)
	}
	if err := b.waitOperator(ctx); err != nil {
		return err
	}
	if err := b.makeSharedClaim(ctx); err != nil {
		return err
	}
	if m.inplace {
		return b.inplaceBench(ctx, m.script, m.sizes, m.until)
	}
	if m.shrink {
		return b.shrinkBench(ctx, m.script, runs)
	}
	if m.slices {
		return b.slicesBench(ctx, m.script, runs)
	}
	if m.gangs {
		return b.gangsBench(ctx, m.gangCount, m.gangSeconds)
	}
	if m.rayAPI {
		return b.rayAPIBench(ctx, runs)
	}
	var submit, floor []time.Duration
	for i := range runs {
		d, err := b.submitToRunning(ctx, fmt.Sprintf("sub-%d", i))
		if err != nil {
			return err
		}
		submit = append(submit, d)
		d, err = b.floorToRunning(ctx, fmt.Sprintf("floor-%d", i))
		if err != nil {
			return err
		}
		floor = append(floor, d)
	}
	fmt.Printf("submit -> 2 workers running: operator median %s %v, floor (Job+Service by hand) median %s %v, ratio %.2f\n",
		median(submit), submit, median(floor), floor, float64(median(submit))/float64(median(floor)))
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

func (b *bench) cli(args ...string) (string, error) {
	cmd := exec.Command(b.trainyard, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+b.cl.Kubeconfig())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (b *bench) waitOperator(ctx context.Context) error {
	return poll(3*time.Minute, "the operator's Deployment ready", func() bool {
		d, err := b.cl.Client.AppsV1().Deployments("trainyard-system").Get(ctx, "trainyard-operator", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas >= 1
	})
}

// poll checks ok every 50 ms until it holds or timeout passes.
func poll(timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// trainJob is a 2-worker TrainJob running command in the worker image.
func (b *bench) trainJob(name string, command []string) *v1.TrainJob {
	return &v1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.TrainJobSpec{
			Workers: ptr(int32(2)), Command: command, StoragePath: "/shared/results", MaxRestarts: 2,
			Kubernetes: &v1.KubernetesSpec{
				Image: testcluster.WorkerImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: sharedClaim}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// sharedClaim is the claim of the jobs' shared volume: the operator's pod policy refuses
// hostPath volumes in jobs, so a PersistentVolume binds b.shared to it.
const sharedClaim = "bench-shared"

// makeSharedClaim makes the PersistentVolume on b.shared and the claim bound to it.
func (b *bench) makeSharedClaim(ctx context.Context) error {
	if err := os.MkdirAll(b.shared, 0o777); err != nil {
		return err
	}
	empty := ""
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: sharedClaim + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              empty,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: b.shared}},
		}}
	if _, err := b.cl.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("shared volume: %w", err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: sharedClaim, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty, VolumeName: pv.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := b.cl.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("shared claim: %w", err)
	}
	return nil
}

var sleeper = []string{"python3", "-c", "import time; time.sleep(600)"}

// running counts the running pods whose name starts with prefix.
func (b *bench) running(ctx context.Context, prefix string) int {
	pods, err := b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func (b *bench) submitToRunning(ctx context.Context, name string) (time.Duration, error) {
	file, err := b.jobFile(b.trainJob(name, sleeper))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if out, err := b.cli("submit", "--kube", "-f", file); err != nil {
		return 0, fmt.Errorf("submit: %v: %s", err, out)
	}
	if err := poll(3*time.Minute, name+" running", func() bool { return b.running(ctx, name+"-a1-") == 2 }); err != nil {
		return 0, err
	}
	d := time.Since(start)
	_, _ = b.cli("delete", "--kube", name)
	return d, b.settle(ctx, name)
}

// floorToRunning creates the operator's rendering of the same job's first attempt by hand.
func (b *bench) floorToRunning(ctx context.Context, name string) (time.Duration, error) {
	tj := b.trainJob(name, sleeper)
	tj.UID = "floor"
	a, err := workload.Render(tj, 1, workload.Options{Image: testcluster.TrainyardImage})
	if err != nil {
		return 0, err
	}
	a.Service.OwnerReferences = nil
	pods := a.Pods()
	start := time.Now()
	if _, err := b.cl.Client.CoreV1().Services("default").Create(ctx, a.Service, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	for _, p := range pods {
		p.OwnerReferences = nil
		if _, err := b.cl.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return 0, err
		}
	}
	if err := poll(3*time.Minute, name+" running", func() bool { return b.running(ctx, a.Service.Name+"-") == 2 }); err != nil {
		return 0, err
	}
	d := time.Since(start)
	for _, p := range pods {
		_ = b.cl.Client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
	_ = b.cl.Client.CoreV1().Services("default").Delete(ctx, a.Service.Name, metav1.DeleteOptions{})
	return d, b.settle(ctx, name)
}

// settle waits until no pod of name is left, so trials do not overlap.
func (b *bench) settle(ctx context.Context, name string) error {
	return b.settleWithin(ctx, name, 2*time.Minute)
}

func (b *bench) settleWithin(ctx context.Context, name string, timeout time.Duration) error {
	return poll(timeout, name+"'s pods gone", func() bool {
		pods, err := b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		return !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return strings.HasPrefix(p.Name, name+"-") })
	})
}

func (b *bench) jobFile(tj *v1.TrainJob) (string, error) {
	data, err := json.Marshal(tj)
	if err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), tj.Name+".json")
	return path, os.WriteFile(path, data, 0o600)
}

// submit submits tj with `trainyard submit --kube -f`.
func (b *bench) submit(tj *v1.TrainJob) error {
	file, err := b.jobFile(tj)
	if err != nil {
		return err
	}
	if out, err := b.cli("submit", "--kube", "-f", file); err != nil {
		return fmt.Errorf("submit %s: %v: %s", tj.Name, err, out)
	}
	return nil
}

// remove deletes the TrainJob name and waits until its pods are gone.
func (b *bench) remove(ctx context.Context, name string) {
	_, _ = b.cli("delete", "--kube", name)
	_ = b.settleWithin(ctx, name, 10*time.Minute)
}
