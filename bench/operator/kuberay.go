package main

import (
	"context"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// rayClusterGVK is KubeRay's RayCluster.
var rayClusterGVK = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}

// rayImage is the image of the RayClusters' pods (nothing pulls it).
const rayImage = "rayproject/ray:2.46.0"

// rayResult is KubeRay's operator making the pods of cfg.jobs RayClusters of 1 head and
// cfg.workers-1 workers: the peer.
type rayResult struct {
	stretch
	started  time.Duration // exec → its controllers' workers run
	cmd      string
	creates  time.Duration // the RayCluster creates alone
	pods     time.Duration // first create → the last pod seen
	services time.Duration // first create → the last head Service seen
	memory   []memPoint
}

// rayCluster is RayCluster i: a head and workers-1 workers, every pod one container.
func rayCluster(i, workers int) *unstructured.Unstructured {
	pod := func(name string) map[string]any {
		return map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": name, "image": rayImage, "command": []any{"python3", "train.py"}}}}}
	}
	spec := map[string]any{
		"rayVersion":    "2.46.0",
		"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": pod("ray-head")},
	}
	if workers > 1 {
		n := int64(workers - 1)
		spec["workerGroupSpecs"] = []any{map[string]any{"groupName": "workers", "replicas": n, "minReplicas": n,
			"maxReplicas": n, "rayStartParams": map[string]any{}, "template": pod("ray-worker")}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(rayClusterGVK)
	u.SetNamespace(rayNamespace)
	u.SetName(fmt.Sprintf("rc-%05d", i))
	return u
}

// measureKubeRay installs KubeRay's CRDs, starts its operator with its defaults (except
// the ports it would serve on and the namespace of its leader-election lease, which it
// needs outside a cluster), creates cfg.jobs RayClusters from cfg.clients goroutines and
// times until every pod exists. Then it stops the operator and deletes the RayClusters
// and their pods, so that nothing of it is left running when TrainJobs are measured.
func measureKubeRay(ctx context.Context, cfg *config, cp *controlPlane, m *meter) (res rayResult, err error) {
	progress("KubeRay: CRDs from %s", cfg.kuberayCRDs)
	if _, err := envtest.InstallCRDs(cp.config, envtest.CRDInstallOptions{Paths: []string{cfg.kuberayCRDs}, ErrorIfPathMissing: true}); err != nil {
		return res, fmt.Errorf("install KubeRay's CRDs: %w", err)
	}
	t, err := startTracker(ctx, cp, rayNamespace, false)
	if err != nil {
		return res, err
	}
	defer t.stop()
	start := time.Now()
	op, err := startComponent(cfg, "kuberay-operator", []string{"KUBECONFIG=" + cp.kubeconfig}, cfg.kuberay,
		"--metrics-addr", "0", "--health-probe-bind-address", "0", "--leader-election-namespace", "kube-system")
	if err != nil {
		return res, err
	}
	// A slow stop (KubeRay's operator has taken more than 20 s to end on SIGTERM on a busy
	// machine) is killed and costs nothing of what was measured.
	defer func() {
		if stopErr := op.stop(); stopErr != nil {
			progress("KubeRay: %v", stopErr)
		}
	}()
	if err := op.waitLog(ctx, readyLine, 2*time.Minute); err != nil {
		return res, err
	}
	res.started, res.cmd = time.Since(start), op.commandLine(cfg.root)
	m.pids[procKubeRay] = op.pid()
	defer delete(m.pids, procKubeRay)
	mark := func(what string) error {
		mem, err := op.memory()
		res.memory = append(res.memory, memPoint{what: what, mem: mem})
		return err
	}
	if err := mark("started, caches in sync, no RayClusters"); err != nil {
		return res, err
	}
	n, pods := cfg.jobs, cfg.jobs*cfg.workers
	progress("KubeRay: %d RayClusters of 1 head and %d workers created from %d goroutines", n, cfg.workers-1, cfg.clients)
	res.stretch, err = m.measure(ctx, "KubeRay: RayClusters", func() error {
		start := time.Now()
		var err error
		if res.creates, err = hammer(n, cfg.clients, func(i int) error { return cp.client.Create(ctx, rayCluster(i, cfg.workers)) }); err != nil {
			return err
		}
		progress("KubeRay: creates done in %s; waiting for every pod", res.creates.Round(time.Millisecond))
		return waitFor(ctx, cfg.poll, "KubeRay: pods", func() (bool, string, error) {
			np, lastPod := t.count(kindPod)
			ns, lastSvc := t.count(kindService)
			res.pods, res.services = lastPod.Sub(start), lastSvc.Sub(start)
			return np >= pods && ns >= n, fmt.Sprintf("%d of %d pods, %d of %d Services", np, pods, ns, n), nil
		})
	})
	if err != nil {
		return res, err
	}
	time.Sleep(2 * time.Second) // the last status writes
	if err := mark(fmt.Sprintf("after: %d RayClusters, %d pods", n, pods)); err != nil {
		return res, err
	}
	return res, nil
}

// removeKubeRay deletes the RayClusters, their pods and Services straight from the
// benchmark's client (KubeRay's operator is stopped by then).
func removeKubeRay(ctx context.Context, cp *controlPlane) error {
	rc := &unstructured.Unstructured{}
	rc.SetGroupVersionKind(rayClusterGVK)
	if err := cp.client.DeleteAllOf(ctx, rc, client.InNamespace(rayNamespace)); err != nil {
		return fmt.Errorf("delete the RayClusters: %w", err)
	}
	if err := deleteAllPods(ctx, cp.client, rayNamespace); err != nil {
		return fmt.Errorf("delete the RayClusters' pods: %w", err)
	}
	var svcs corev1.ServiceList
	if err := cp.client.List(ctx, &svcs, client.InNamespace(rayNamespace)); err != nil {
		return err
	}
	for i := range svcs.Items {
		if err := client.IgnoreNotFound(cp.client.Delete(ctx, &svcs.Items[i])); err != nil {
			return err
		}
	}
	// Wait until the namespace is empty, so that no deletion (nor the garbage collector's
	// look at what is left) overlaps the operator's phases.
	return waitFor(ctx, time.Second, "KubeRay: its objects gone", func() (bool, string, error) {
		var pods corev1.PodList
		var svcs corev1.ServiceList
		if err := cp.client.List(ctx, &pods, client.InNamespace(rayNamespace)); err != nil {
			return false, "", err
		}
		if err := cp.client.List(ctx, &svcs, client.InNamespace(rayNamespace)); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0 && len(svcs.Items) == 0, fmt.Sprintf("%d pods, %d Services left", len(pods.Items), len(svcs.Items)), nil
	})
}

// deleteAllPods deletes every pod of namespace, asking again while the API server answers
// that it ran out of time (a delete collection of 4,000 pods can take longer than its
// 60 s, and goes on after that answer).
func deleteAllPods(ctx context.Context, c client.Client, namespace string) error {
	for {
		err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(namespace))
		if err == nil || !(apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
