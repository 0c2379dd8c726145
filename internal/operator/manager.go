package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// Name names the operator: its controller, its events' reporter and its leader lease.
const Name = "trainyard-operator"

// Scheme returns the kinds the operator reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Run runs the operator's manager until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options, logger *slog.Logger) error {
	mgr, err := NewManager(cfg, opts, logger)
	if err != nil {
		return err
	}
	logger.Info("operator starting", "namespace", opts.Namespace, "image", opts.Image, "leaderElection", opts.LeaderElection)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// NewManager returns a manager with the TrainJob controller, health probes and metrics,
// ready to Start.
func NewManager(cfg *rest.Config, opts Options, logger *slog.Logger) (manager.Manager, error) {
	if opts.Image == "" {
		return nil, fmt.Errorf("operator: the trainyard image for the workers' init container is required (--image)")
	}
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))
	kueue, err := servesWorkloads(cfg)
	if err != nil {
		return nil, err
	}
	podGroups, err := gangPlacement(cfg, opts, logger)
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{workload.LabelManagedBy: workload.ManagedBy})
	cacheOpts := cache.Options{
		// Only what the operator made: a cluster's other pods stay out of memory.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:     {Label: managed, Transform: slimPod},
			&corev1.Service{}: {Label: managed},
			&corev1.Node{}:    {Transform: slimNode},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if kueue {
		cacheOpts.ByObject[newWorkloadObject()] = cache.ByObject{Label: managed}
	}
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	metricsAddr := opts.MetricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	metrics := metricsserver.Options{BindAddress: metricsAddr}
	if !opts.MetricsInsecure {
		// HTTPS (a self-signed certificate), to those the API server authenticates
		// (TokenReview) and allows to get /metrics (SubjectAccessReview): metricsauth.go.
		metrics.SecureServing = true
		metrics.FilterProvider = metricsAuth
		// HTTP/1.1 only, as kubebuilder's operators do (HTTP/2's stream resets, CVE-2023-44487).
		metrics.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	if len(opts.APIServerCIDRs) == 0 {
		opts.APIServerCIDRs = apiServerCIDRs(cfg, logger)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: Scheme(),
		Cache:  cacheOpts,
		// Kueue's Workloads are unstructured (kueue.go): read them from the cache too.
		Client:                  client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                 metrics,
		HealthProbeBindAddress:  opts.ProbeAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        Name + ".trainyard.dev",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, fmt.Errorf("operator: create the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("operator: add the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("operator: add the readiness check: %w", err)
	}
	if err := indexChildren(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if !kueue {
		logger.Info("the cluster serves no Kueue Workloads (kueue.x-k8s.io/v1beta2): TrainJobs with a queue name wait until Kueue is installed and the operator restarted")
	}
	r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(Name), Options: opts, Kueue: kueue, PodGroups: podGroups}
	if err := r.SetupWithManager(mgr, opts.Workers); err != nil {
		return nil, err
	}
	return mgr, nil
}

// SetupWithManager registers the reconciler, watching TrainJobs, their pods and, with
// Kueue (r.Kueue), their Workloads.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, workers int) error {
	if workers <= 0 {
		workers = DefaultWorkers
	}
	read := r.Progress
	if read == nil {
		read = readProgress
	}
	r.poller = newPoller(read, workers)
	if err := mgr.Add(r.poller); err != nil {
		return fmt.Errorf("operator: add the progress poller: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("trainjob").
		For(&v1.TrainJob{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToJob)).
		WatchesRawSource(source.Channel(r.poller.events, &handler.EnqueueRequestForObject{})).
		// A process runs one manager, but tests start several in one process.
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: ptr(true)})
	if r.Kueue {
		b = b.Owns(newWorkloadObject())
	}
	err := b.Complete(r)
	if err != nil {
		return fmt.Errorf("operator: set up the TrainJob controller: %w", err)
	}
	return nil
}

// servesWorkloads reports whether the API server serves Kueue's Workloads.
func servesWorkloads(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("operator: discovery: %w", err)
	}
	list, err := dc.ServerResourcesForGroupVersion(workloadGVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("operator: look for Kueue's Workloads: %w", err)
	}
	for _, res := range list.APIResources {
		if res.Kind == workloadGVK.Kind {
			return true, nil
		}
	}
	return false, nil
}

// gangPlacement reports whether the gangs' pods form PodGroups (podgroup.go), and says
// how gangs are placed.
func gangPlacement(cfg *rest.Config, opts Options, logger *slog.Logger) (bool, error) {
	mode := opts.gangPlacement()
	if !slices.Contains(GangPlacements, mode) {
		return false, fmt.Errorf("operator: gang placement %q: want one of %s", mode, strings.Join(GangPlacements, ", "))
	}
	served := false
	if mode == GangPlacementAuto {
		var err error
		if served, err = servesPodGroups(cfg); err != nil {
			return false, err
		}
	}
	switch {
	case served:
		logger.Info("gangs in no Kueue queue are placed whole by the scheduler: each attempt's pods form a PodGroup (scheduling.k8s.io/v1beta1)")
	case mode == GangPlacementOff:
		logger.Info("gang placement is off: the scheduler places each pod on its own, and two gangs may split the room between them")
	default:
		logger.Info("gangs in no Kueue queue are placed whole by the operator: one gang places at a time, and a gang placed in part gives its room back")
	}
	return served, nil
}

// podToJob maps a worker pod to its TrainJob.
func podToJob(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[workload.LabelJob]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

// slimNode keeps what the operator reads of a node (its name, allocatable resources and
// Ready condition), dropping its image list and the rest of its status.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = append(ready, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: n.Namespace, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable, Capacity: n.Status.Capacity, Conditions: ready},
	}, nil
}

// slimPod keeps of a cached pod what the reconciler reads: metadata, status, the node and
// the containers' ports.
// The pod template (with the TrainJob as JSON in the worker's environment) is most of a
// worker pod's size.
func slimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		slim := corev1.PodSpec{NodeName: p.Spec.NodeName}
		for _, c := range p.Spec.Containers {
			slim.Containers = append(slim.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
		p.Spec = slim
	}
	return obj, nil
}
