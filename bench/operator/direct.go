package main

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/workload"
)

// directResult is what the peer measured: the API server doing, for the benchmark's
// own client, the writes the operator does for its TrainJobs.
type directResult struct {
	create  stretch // attempt 1's Services and Jobs created
	pods    stretch // their pods created and set Running (setup)
	restart stretch // one worker failed, attempt 1 deleted, attempt 2 created
	remove  stretch // attempt 2's Jobs and Services deleted
}

// measureDirect creates, restarts and deletes cfg.jobs attempts straight from the
// benchmark's client, in directNamespace, with cfg.clients goroutines. The objects are
// what workload.Render makes for TrainJobs like the operator's (which do not exist
// here: they only give the objects their owner and UID).
func measureDirect(ctx context.Context, cfg *config, cp *controlPlane, m *meter) (res directResult, err error) {
	c, opts := cp.client, workload.Options{Image: cfg.image}
	first := make([]*workload.Attempt, cfg.jobs)
	second := make([]*workload.Attempt, cfg.jobs)
	for i := range cfg.jobs {
		tj := trainJob(directNamespace, i, cfg.workers)
		tj.UID = uuid.NewUUID()
		if first[i], err = workload.Render(tj, 1, opts); err != nil {
			return res, err
		}
		if second[i], err = workload.Render(tj, 2, opts); err != nil {
			return res, err
		}
	}
	create := func(a *workload.Attempt) error {
		for _, obj := range []client.Object{a.Service, a.Job} { // the operator's order
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %s: %w", obj.GetName(), err)
			}
		}
		return nil
	}
	progress("peer: %d Services and %d Jobs created from the benchmark's client, %d goroutines", cfg.jobs, cfg.jobs, cfg.clients)
	if res.create, err = m.measure(ctx, "peer: create attempt 1", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, func(i int) error { return create(first[i]) })
		return err
	}); err != nil {
		return res, err
	}
	pods := make([][]*corev1.Pod, cfg.jobs)
	progress("peer: %d pods created and set Running (setup)", cfg.jobs*cfg.workers)
	if res.pods, err = m.measure(ctx, "peer: pods", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, func(i int) (err error) {
			pods[i], err = startPods(ctx, c, first[i].Job)
			return err
		})
		return err
	}); err != nil {
		return res, err
	}
	progress("peer: one worker of each Failed, attempt 1 deleted, attempt 2 created")
	restart := func(i int) error {
		if err := failPod(ctx, c, pods[i][failedWorker(cfg.workers)]); err != nil {
			return err
		}
		if err := deleteAttempt(ctx, c, first[i]); err != nil {
			return err
		}
		uid := first[i].Job.Labels[workload.LabelJobUID]
		if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(directNamespace),
			client.MatchingLabels{workload.LabelJobUID: uid, workload.LabelAttempt: strconv.Itoa(1)}); err != nil {
			return fmt.Errorf("delete the pods of %s: %w", first[i].Job.Name, err)
		}
		return create(second[i])
	}
	if res.restart, err = m.measure(ctx, "peer: restart", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, restart)
		return err
	}); err != nil {
		return res, err
	}
	progress("peer: attempt 2's Jobs and Services deleted")
	res.remove, err = m.measure(ctx, "peer: delete attempt 2", func() error {
		_, err := hammer(cfg.jobs, cfg.clients, func(i int) error { return deleteAttempt(ctx, c, second[i]) })
		return err
	})
	return res, err
}

// deleteAttempt deletes an attempt's Job (in the background, as the operator does) and
// Service.
func deleteAttempt(ctx context.Context, c client.Client, a *workload.Attempt) error {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	meta := metav1.ObjectMeta{Name: a.Job.Name, Namespace: a.Job.Namespace}
	for _, obj := range []client.Object{&batchv1.Job{ObjectMeta: meta}, &corev1.Service{ObjectMeta: *meta.DeepCopy()}} {
		if err := c.Delete(ctx, obj, bg); err != nil {
			return fmt.Errorf("delete %s: %w", meta.Name, err)
		}
	}
	return nil
}
