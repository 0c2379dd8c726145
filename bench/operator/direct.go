package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/workload"
)

// directResult is what the peer measured: the API server doing, for the benchmark's
// own client, the writes the operator does for its TrainJobs.
type directResult struct {
	create  stretch // attempt 1's Services and pods created
	pods    stretch // their pods set Running (setup)
	restart stretch // one worker failed, attempt 1 deleted, attempt 2 created
	remove  stretch // attempt 2's Services and pods deleted
}

// peerAttempt is one attempt's objects as the peer creates them.
type peerAttempt struct {
	uid     string
	service *corev1.Service
	pods    []*corev1.Pod
}

// renderPeer renders attempt n of TrainJob i (UID uid, or a new one if empty) as the
// operator would (workload.Render),
// without the owner reference: the TrainJob does not exist here, and kube-controller-
// manager's garbage collector would delete what names an owner that does not exist.
func renderPeer(cfg *config, i, n int, uid string) (*peerAttempt, error) {
	tj := trainJob(directNamespace, i, cfg.workers)
	tj.UID = types.UID(uid)
	if uid == "" {
		tj.UID = uuid.NewUUID()
	}
	a, err := workload.Render(tj, n, workload.Options{Image: cfg.image})
	if err != nil {
		return nil, err
	}
	out := &peerAttempt{uid: string(tj.UID), service: a.Service, pods: a.Pods()}
	out.service.OwnerReferences = nil
	for _, p := range out.pods {
		p.OwnerReferences = nil
	}
	return out, nil
}

// create creates the attempt's Service, then its pods: the operator's order.
func (a *peerAttempt) create(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, a.service); err != nil {
		return fmt.Errorf("create Service %s: %w", a.service.Name, err)
	}
	for _, p := range a.pods {
		if err := c.Create(ctx, p); err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// remove deletes the attempt's Service and its pods (one delete-collection by label, as
// the operator's teardown does).
func (a *peerAttempt) remove(ctx context.Context, c client.Client) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: a.service.Name, Namespace: a.service.Namespace}}
	if err := c.Delete(ctx, svc); err != nil {
		return fmt.Errorf("delete Service %s: %w", svc.Name, err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(a.service.Namespace),
		client.MatchingLabels{workload.LabelJobUID: a.uid, workload.LabelAttempt: a.service.Labels[workload.LabelAttempt]}); err != nil {
		return fmt.Errorf("delete the pods of %s: %w", svc.Name, err)
	}
	return nil
}

// measureDirect creates, restarts and deletes cfg.jobs attempts straight from the
// benchmark's client, in directNamespace, with cfg.clients goroutines. The objects are
// what workload.Render makes for TrainJobs like the operator's (which do not exist
// here: they only give the objects their names, labels and UID).
func measureDirect(ctx context.Context, cfg *config, cp *controlPlane, m *meter) (res directResult, err error) {
	c := cp.client
	first := make([]*peerAttempt, cfg.jobs)
	second := make([]*peerAttempt, cfg.jobs)
	for i := range cfg.jobs {
		if first[i], err = renderPeer(cfg, i, 1, ""); err != nil {
			return res, err
		}
		if second[i], err = renderPeer(cfg, i, 2, first[i].uid); err != nil {
			return res, err
		}
	}
	progress("peer: %d Services and %d pods created from the benchmark's client, %d goroutines", cfg.jobs, cfg.jobs*cfg.workers, cfg.clients)
	if res.create, err = m.measure(ctx, "peer: create attempt 1", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, func(i int) error { return first[i].create(ctx, c) })
		return err
	}); err != nil {
		return res, err
	}
	progress("peer: %d pods set Running (setup)", cfg.jobs*cfg.workers)
	running := runningPatch()
	if res.pods, err = m.measure(ctx, "peer: pods", func() error {
		_, err := hammer(cfg.jobs*cfg.workers, cfg.clients, func(i int) error {
			return patchPodStatus(ctx, c, directNamespace, first[i/cfg.workers].pods[i%cfg.workers].Name, running)
		})
		return err
	}); err != nil {
		return res, err
	}
	progress("peer: one worker of each Failed, attempt 1 deleted, attempt 2 created")
	failed := failedPatch()
	restart := func(i int) error {
		if err := patchPodStatus(ctx, c, directNamespace, first[i].pods[failedWorker(cfg.workers)].Name, failed); err != nil {
			return err
		}
		if err := first[i].remove(ctx, c); err != nil {
			return err
		}
		return second[i].create(ctx, c)
	}
	if res.restart, err = m.measure(ctx, "peer: restart", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, restart)
		return err
	}); err != nil {
		return res, err
	}
	progress("peer: attempt 2's Services and pods deleted")
	res.remove, err = m.measure(ctx, "peer: delete attempt 2", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, func(i int) error { return second[i].remove(ctx, c) })
		return err
	})
	return res, err
}
