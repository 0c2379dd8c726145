// Package envtest_test runs the TrainJob CustomResourceDefinition (config/crd/bases) on a real
// kube-apiserver and etcd started by controller-runtime's envtest: the API server's own
// validation, the status subresource and the printer columns.
//
// The binaries come from KUBEBUILDER_ASSETS (`make test` builds them with `make
// envtest-assets` and sets it), else from ./bin/k8s-<version> after `make envtest-assets`;
// without either the tests are skipped.
package envtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/testkube"
)

// startControlPlane starts etcd and kube-apiserver with the TrainJob CRD installed.
func startControlPlane(t *testing.T) client.Client {
	t.Helper()
	return testkube.Start(t, testkube.Options{}).Client
}

func ptr[T any](v T) *T { return &v }

// validJob is a TrainJob the CRD accepts, with a field of most kinds set.
func validJob(ns, name string) *v1alpha1.TrainJob {
	return &v1alpha1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TrainJobSpec{
			Workers:        ptr(int32(2)),
			ProcsPerWorker: ptr(int32(4)),
			Resources: v1alpha1.WorkerResources{
				CPU:    ptr(resource.MustParse("500m")),
				Memory: ptr(resource.MustParse("8Gi")),
				GPU:    4,
			},
			Command:     []string{"python3", "train.py"},
			Args:        []string{"--epochs", "5"},
			Env:         []v1alpha1.EnvVar{{Name: "SEED", Value: "1"}},
			MaxRestarts: 3,
			Checkpoints: v1alpha1.CheckpointPolicy{Keep: 2, ScoreMetric: "accuracy", ScoreOrder: "max"},
			Kubernetes: &v1alpha1.KubernetesSpec{
				Image:           "pytorch/pytorch:2.9.0",
				ImagePullPolicy: corev1.PullIfNotPresent,
				NodeSelector:    map[string]string{"pool": "gpu"},
			},
			TerminationGracePeriodSeconds: ptr(int64(10)),
		},
	}
}

func TestTrainJobCRD(t *testing.T) {
	c := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "trainyard-envtest-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}

	t.Run("CreateValid", func(t *testing.T) {
		job := validJob(ns.Name, "valid")
		if err := c.Create(ctx, job); err != nil {
			t.Fatalf("create a valid TrainJob: %v", err)
		}
		var got v1alpha1.TrainJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			t.Fatalf("read it back: %v", err)
		}
		want := validJob(ns.Name, "valid")
		if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("spec read back differs:\n got %+v\nwant %+v", got.Spec, want.Spec)
		}
		if got.UID == "" || got.CreationTimestamp.IsZero() {
			t.Errorf("no uid or creationTimestamp: %+v", got.ObjectMeta)
		}
	})

	t.Run("RefuseInvalid", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			mutate func(*v1alpha1.TrainJob)
			field  string
		}{
			{"zero-workers", func(j *v1alpha1.TrainJob) { j.Spec.Workers = ptr(int32(0)) }, "spec.workers"},
			{"no-command", func(j *v1alpha1.TrainJob) { j.Spec.Command = nil }, "spec.command"},
			{"empty-command", func(j *v1alpha1.TrainJob) { j.Spec.Command = []string{} }, "spec.command"},
			{"bad-pull-policy", func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.ImagePullPolicy = "Sometimes" },
				"spec.kubernetes.imagePullPolicy"},
			{"negative-restarts", func(j *v1alpha1.TrainJob) { j.Spec.MaxRestarts = -1 }, "spec.maxRestarts"},
			{"negative-disruptions", func(j *v1alpha1.TrainJob) { j.Spec.MaxDisruptions = ptr(int32(-1)) }, "spec.maxDisruptions"},
			{"bad-score-order", func(j *v1alpha1.TrainJob) { j.Spec.Checkpoints.ScoreOrder = "best" },
				"spec.checkpoints.scoreOrder"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				job := validJob(ns.Name, tc.name)
				tc.mutate(job)
				err := c.Create(ctx, job)
				if err == nil {
					t.Fatalf("the API server accepted an invalid TrainJob (%s)", tc.name)
				}
				t.Logf("refused: %v", err)
				if !apierrors.IsInvalid(err) {
					t.Fatalf("want an Invalid error, got %v", err)
				}
				if !strings.Contains(err.Error(), tc.field) {
					t.Errorf("error does not name %s: %v", tc.field, err)
				}
				var status apierrors.APIStatus
				if errors.As(err, &status) && status.Status().Details != nil {
					found := false
					for _, cause := range status.Status().Details.Causes {
						found = found || strings.HasPrefix(cause.Field, tc.field)
					}
					if !found {
						t.Errorf("no cause names field %s: %+v", tc.field, status.Status().Details.Causes)
					}
				}
			})
		}
	})

	t.Run("FrozenPodFields", func(t *testing.T) {
		testFrozenPodFields(ctx, t, c, ns.Name)
	})

	t.Run("StatusSubresource", func(t *testing.T) {
		job := validJob(ns.Name, "status")
		if err := c.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		job.Status = v1alpha1.TrainJobStatus{
			Phase: v1alpha1.PhaseRunning, Attempt: 2, Restarts: 1, WorkersReady: 2,
			Reason: "all workers run",
			Conditions: []metav1.Condition{{
				Type: "Running", Status: metav1.ConditionTrue, Reason: "WorkersReady",
				Message: "2 of 2 workers run", LastTransitionTime: metav1.Now(),
			}},
		}
		if err := c.Status().Update(ctx, job); err != nil {
			t.Fatalf("update status through the status subresource: %v", err)
		}
		var got v1alpha1.TrainJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != v1alpha1.PhaseRunning || got.Status.WorkersReady != 2 ||
			got.Status.Restarts != 1 || len(got.Status.Conditions) != 1 {
			t.Errorf("status not stored: %+v", got.Status)
		}

		// With the subresource on, an update of the main resource leaves the status alone.
		got.Status.Phase = v1alpha1.PhaseFailed
		got.Spec.MaxRestarts = 5
		if err := c.Update(ctx, &got); err != nil {
			t.Fatal(err)
		}
		var again v1alpha1.TrainJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &again); err != nil {
			t.Fatal(err)
		}
		if again.Status.Phase != v1alpha1.PhaseRunning || again.Spec.MaxRestarts != 5 {
			t.Errorf("main-resource update: phase %q (want Running), maxRestarts %d (want 5)",
				again.Status.Phase, again.Spec.MaxRestarts)
		}
	})

	t.Run("PrinterColumns", func(t *testing.T) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: "trainjobs.trainyard.dev"}, &crd); err != nil {
			t.Fatalf("read the CRD back: %v", err)
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != v1alpha1.Version {
			t.Fatalf("versions: %+v", crd.Spec.Versions)
		}
		v := crd.Spec.Versions[0]
		cols := map[string]string{}
		for _, col := range v.AdditionalPrinterColumns {
			cols[col.Name] = col.JSONPath
		}
		want := map[string]string{
			"Phase": ".status.phase", "Ready": ".status.workersReady", "Workers": ".spec.workers",
			"GPUs": ".spec.resources.gpu", "Restarts": ".status.restarts", "Age": ".metadata.creationTimestamp",
		}
		for name, path := range want {
			if cols[name] != path {
				t.Errorf("printer column %s: JSONPath %q, want %q", name, cols[name], path)
			}
		}
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Error("no status subresource")
		}
		if len(crd.Spec.Names.ShortNames) != 1 || crd.Spec.Names.ShortNames[0] != "tj" {
			t.Errorf("short names %v, want [tj]", crd.Spec.Names.ShortNames)
		}
		var established bool
		for _, cond := range crd.Status.Conditions {
			established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			t.Errorf("CRD not established: %+v", crd.Status.Conditions)
		}
	})
}

// What the operator's pod policy checked at admission cannot be edited afterwards: the
// pod template and the service account (added, changed or removed), the volumes once set,
// the git credentials. The refusal names the field. What the operator and the CLI change
// on a live job (workers, suspend, labels, the priority class) may change. (A template
// whose top-level keys change, metadata alone to spec alone, passes: CEL compares a
// schemaless object's values by key. The operator's check before every pod refuses it.)
func testFrozenPodFields(ctx context.Context, t *testing.T, c client.Client, ns string) {
	template := func(raw string) func(*v1alpha1.TrainJob) {
		return func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(raw)} }
	}
	for name, tc := range map[string]struct {
		bare   bool // the job has no pod template, volume, service account or git source
		change func(*v1alpha1.TrainJob)
		field  string // "": allowed
	}{
		"privileged template": {false, template(`{"metadata": {"labels": {"team": "a"}}, "spec": {"hostPID": true,
			"containers": [{"name": "worker", "securityContext": {"privileged": true}}], "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}`),
			"spec.kubernetes.podTemplate"},
		"template label":   {false, template(`{"metadata": {"labels": {"team": "b"}}}`), "spec.kubernetes.podTemplate"},
		"template removed": {false, func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.PodTemplate = nil }, "spec.kubernetes.podTemplate"},
		"template added":   {true, template(`{"spec": {"hostNetwork": true}}`), "spec.kubernetes.podTemplate"},
		"hostpath volume": {false, func(j *v1alpha1.TrainJob) {
			j.Spec.Kubernetes.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}, "spec.kubernetes.volumes"},
		"volumes removed":         {false, func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.Volumes = nil }, "spec.kubernetes.volumes"},
		"service account":         {false, func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.ServiceAccountName = "default" }, "spec.kubernetes.serviceAccountName"},
		"service account added":   {true, func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.ServiceAccountName = "kube-proxy" }, "spec.kubernetes.serviceAccountName"},
		"git credentials":         {false, func(j *v1alpha1.TrainJob) { j.Spec.Source.Git.CredentialsSecret = "ci-token" }, "spec.source.git.credentialsSecret"},
		"git credentials removed": {false, func(j *v1alpha1.TrainJob) { j.Spec.Source = nil }, "spec.source.git.credentialsSecret"},
		"workers and suspend": {false, func(j *v1alpha1.TrainJob) {
			j.Spec.Workers, j.Spec.Suspend = ptr(int32(3)), true
		}, ""},
		"labels, priority class and image": {false, func(j *v1alpha1.TrainJob) {
			j.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-b"}
			j.Spec.Kubernetes.PriorityClassName, j.Spec.Kubernetes.Image = "team-high", "other:1"
		}, ""},
		"same template, spaced differently": {false, template(`{ "metadata" : { "labels" : { "team" : "a" } } }`), ""},
		"volumes added":                     {true, func(j *v1alpha1.TrainJob) { j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "runs"}} }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			job := validJob(ns, strings.NewReplacer(" ", "-", ",", "").Replace(name))
			if !tc.bare {
				k := job.Spec.Kubernetes
				k.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"metadata": {"labels": {"team": "a"}}}`)}
				k.ServiceAccountName = "trainer"
				k.Volumes = []corev1.Volume{{Name: "runs", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "runs"}}}}
				job.Spec.Source = &v1alpha1.SourceSpec{Git: &v1alpha1.GitSource{URL: "https://git.example.com/r.git", CredentialsSecret: "team-git"}}
			}
			if err := c.Create(ctx, job); err != nil {
				t.Fatal(err)
			}
			tc.change(job)
			err := c.Update(ctx, job)
			if tc.field == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+" is immutable") {
				t.Fatalf("want an Invalid error saying %s is immutable, got %v", tc.field, err)
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Details == nil ||
				!slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Field == tc.field }) {
				t.Errorf("no cause names %s: %v", tc.field, err)
			}
		})
	}
}
