package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KueueVersion is the Kueue that `make cluster-assets` builds into
// <assets>/kueue-<KueueVersion>/ with its CRDs and webhook configurations.
const KueueVersion = "v0.15.2"

// Kueue's webhook as this cluster serves it: Kueue runs as a host process, and the API
// server reaches its webhook through the Service's endpoints (--enable-aggregator-routing)
// at the node's address, with the CA Kueue's own certificate manager writes into the
// webhook configurations.
const (
	kueueNamespace = "kueue-system"
	kueueService   = "kueue-webhook-service"
	kueueSecret    = "kueue-webhook-server-cert"
	kueueWebhook   = 9443
)

// StartKueue installs Kueue's CRDs and webhooks (those of Kueue's own objects and of
// batch/v1 Jobs) and starts Kueue with TrainJobs as an external framework (the operator
// makes and follows their Workloads), waiting until its webhooks answer.
func (c *Cluster) StartKueue(ctx context.Context, assets string) error {
	dir := filepath.Join(assets, "kueue-"+KueueVersion)
	bin := filepath.Join(dir, "kueue")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kueue: %w; run `make cluster-assets`", err)
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("kueue: client: %w", err)
	}
	crds, _ := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	for _, f := range crds {
		if err := createFromFile(ctx, cl, f, convertThroughKueue); err != nil {
			return fmt.Errorf("kueue CRDs: %w", err)
		}
	}
	for _, obj := range kueueObjects() {
		if err := create(ctx, cl, obj); err != nil {
			return fmt.Errorf("kueue: %w", err)
		}
	}
	if err := createFromFile(ctx, cl, filepath.Join(dir, "webhooks.yaml"), keepKueueWebhooks); err != nil {
		return fmt.Errorf("kueue webhooks: %w", err)
	}
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health: {healthProbeBindAddress: "127.0.0.1:0"}
metrics: {bindAddress: "0"}
webhook: {port: %d, host: %s, certDir: %s}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: true, webhookServiceName: %s, webhookSecretName: %s}
manageJobsWithoutQueueName: false
integrations: {frameworks: ["batch/job"], externalFrameworks: ["TrainJob.v1alpha1.trainyard.dev"]}
`, kueueNamespace, kueueWebhook, nodeIP, c.path("kueue", "certs"), kueueService, kueueSecret)
	if err := os.MkdirAll(c.path("kueue", "certs"), 0o700); err != nil {
		return fmt.Errorf("kueue: %w", err)
	}
	if err := os.WriteFile(c.path("kueue", "config.yaml"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("kueue config: %w", err)
	}
	// No visibility API server: it wants in-cluster credentials, and nothing here reads it.
	if _, err := c.start("kueue", bin, "--config", c.path("kueue", "config.yaml"), "--kubeconfig", c.kubeconfig,
		"--feature-gates=VisibilityOnDemand=false,ElasticJobsViaWorkloadSlices=true"); err != nil {
		return err
	}
	// In a pod, kubelet would project the Secret Kueue's certificate manager fills into its
	// certificate folder, which the manager waits for; here we copy it there.
	if err := c.waitFor("Kueue's webhook certificate", 2*time.Minute, func() (bool, error) {
		return c.copyKueueCert(ctx)
	}); err != nil {
		return err
	}
	// A dry-run ResourceFlavor passes Kueue's webhooks only once they serve with a CA the
	// API server trusts.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": "probe"},
	}}
	return c.waitFor("Kueue's webhooks", 3*time.Minute, func() (bool, error) {
		err := cl.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err == nil, err
	})
}

// copyKueueCert writes the webhook Secret's files into Kueue's certificate folder once the
// Secret holds them.
func (c *Cluster) copyKueueCert(ctx context.Context) (bool, error) {
	sec, err := c.Client.CoreV1().Secrets(kueueNamespace).Get(ctx, kueueSecret, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	files := []string{"ca.crt", "tls.crt", "tls.key"}
	for _, f := range files {
		if len(sec.Data[f]) == 0 {
			return false, fmt.Errorf("secret %s has no %s yet", kueueSecret, f)
		}
	}
	for _, f := range files {
		if err := os.WriteFile(c.path("kueue", "certs", f), sec.Data[f], 0o600); err != nil {
			return false, err
		}
	}
	return true, nil
}

// kueueObjects are Kueue's namespace, its webhook Service pointing at this host, and the
// Secret its certificate manager fills.
func kueueObjects() []*unstructured.Unstructured {
	obj := func(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }
	return []*unstructured.Unstructured{
		obj(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kueueNamespace}}),
		obj(map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": kueueService, "namespace": kueueNamespace},
			"spec":     map[string]any{"ports": []any{map[string]any{"name": "https", "port": int64(443), "targetPort": int64(kueueWebhook)}}}}),
		obj(map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": kueueService + "-host", "namespace": kueueNamespace,
				"labels": map[string]any{"kubernetes.io/service-name": kueueService}},
			"addressType": "IPv4",
			"endpoints":   []any{map[string]any{"addresses": []any{nodeIP}, "conditions": map[string]any{"ready": true}}},
			"ports":       []any{map[string]any{"name": "https", "port": int64(kueueWebhook), "protocol": "TCP"}}}),
		obj(map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": kueueSecret, "namespace": kueueNamespace}}),
	}
}

// keepKueueWebhooks keeps of Kueue's webhook configurations those of its own objects and
// of batch/v1 Jobs (the others intercept kinds this cluster does not have, or every pod),
// named and pointed as Kueue's certificate manager expects.
func keepKueueWebhooks(obj *unstructured.Unstructured) bool {
	kind := strings.ToLower(strings.TrimSuffix(obj.GetKind(), "WebhookConfiguration"))
	obj.SetName("kueue-" + kind + "-webhook-configuration")
	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	var kept []any
	for _, h := range hooks {
		m := h.(map[string]any)
		path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
		if !strings.Contains(path, "batch-v1-job") && !strings.Contains(path, "kueue-x-k8s-io") {
			continue
		}
		_ = unstructured.SetNestedField(m, kueueService, "clientConfig", "service", "name")
		_ = unstructured.SetNestedField(m, kueueNamespace, "clientConfig", "service", "namespace")
		kept = append(kept, m)
	}
	_ = unstructured.SetNestedSlice(obj.Object, kept, "webhooks")
	return len(kept) > 0
}

// kueueConverted are the CRDs whose conversion webhook Kueue's certificate manager gives
// its CA (pkg/util/cert); the others keep the default conversion.
var kueueConverted = map[string]bool{
	"localqueues.kueue.x-k8s.io": true, "clusterqueues.kueue.x-k8s.io": true, "workloads.kueue.x-k8s.io": true,
	"cohorts.kueue.x-k8s.io": true, "multikueueclusters.kueue.x-k8s.io": true,
}

// convertThroughKueue gives those CRDs Kueue's conversion webhook, as Kueue's own
// kustomization does.
func convertThroughKueue(crd *unstructured.Unstructured) bool {
	if !kueueConverted[crd.GetName()] {
		return true
	}
	_ = unstructured.SetNestedMap(crd.Object, map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{"service": map[string]any{
				"name": kueueService, "namespace": kueueNamespace, "path": "/convert"}},
		},
	}, "spec", "conversion")
	return true
}

// createFromFile creates each object of a multi-document YAML file that keep (when given)
// keeps, possibly changed.
func createFromFile(ctx context.Context, cl client.Client, path string, keep func(*unstructured.Unstructured) bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if obj.Object == nil || (keep != nil && !keep(&obj)) {
			continue
		}
		if err := create(ctx, cl, &obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

func create(ctx context.Context, cl client.Client, obj *unstructured.Unstructured) error {
	if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}
