package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Kinds the tracker watches (metadata only).
const (
	kindService = "Service"
	kindPod     = "Pod"
)

// tracker watches a namespace: Services and pods (metadata only), recording when each
// object was first seen and when it went, and, for the operator's namespace, TrainJobs
// (whole, for their status). Pods are tracked under podKey, so a worker's pod is known
// by its job, attempt and index whoever named it.
type tracker struct {
	cache  cache.Cache
	kinds  map[string]*watched
	cancel context.CancelFunc
	done   chan struct{}
}

// watched is what the watch of one kind saw: when each object (by name) was added and
// deleted.
type watched struct {
	mu      sync.Mutex
	added   map[string]time.Time
	deleted map[string]time.Time
}

// startTracker starts the watches on namespace ns and waits until they have listed it;
// trainJobs adds a watch of TrainJobs.
func startTracker(ctx context.Context, cp *controlPlane, ns string, trainJobs bool) (*tracker, error) {
	c, err := cache.New(cp.config, cache.Options{Scheme: cp.scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	t := &tracker{cache: c, kinds: map[string]*watched{}, done: make(chan struct{})}
	for kind, gvk := range map[string]schema.GroupVersionKind{
		kindService: corev1.SchemeGroupVersion.WithKind("Service"),
		kindPod:     corev1.SchemeGroupVersion.WithKind("Pod"),
	} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		w := &watched{added: map[string]time.Time{}, deleted: map[string]time.Time{}}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: w.add, DeleteFunc: w.remove}); err != nil {
			return nil, err
		}
		t.kinds[kind] = w
	}
	if trainJobs {
		if _, err := c.GetInformer(ctx, &v1.TrainJob{}); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go func() {
		defer close(t.done)
		_ = c.Start(cctx)
	}()
	if !c.WaitForCacheSync(ctx) {
		t.stop()
		return nil, fmt.Errorf("the benchmark's watches did not sync: %w", ctx.Err())
	}
	return t, nil
}

// stop ends the watches.
func (t *tracker) stop() {
	t.cancel()
	<-t.done
}

func (w *watched) add(obj any) {
	if o, ok := obj.(client.Object); ok {
		now, key := time.Now(), podKey(o.GetName(), o.GetLabels())
		w.mu.Lock()
		if _, seen := w.added[key]; !seen {
			w.added[key] = now
		}
		w.mu.Unlock()
	}
}

func (w *watched) remove(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(client.Object); ok {
		now, key := time.Now(), podKey(o.GetName(), o.GetLabels())
		w.mu.Lock()
		w.deleted[key] = now
		w.mu.Unlock()
	}
}

// present counts the names that exist now and, once all do, returns the latest time one
// of them was first seen.
func (t *tracker) present(kind string, names []string) (int, time.Time) {
	w := t.kinds[kind]
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	n := 0
	for _, name := range names {
		at, ok := w.added[name]
		if _, gone := w.deleted[name]; ok && !gone {
			n++
			last = later(last, at)
		}
	}
	return n, last
}

// count counts the objects of a kind that exist now, and returns the latest time one of
// them was first seen.
func (t *tracker) count(kind string) (int, time.Time) {
	w := t.kinds[kind]
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	n := 0
	for name, at := range w.added {
		if _, gone := w.deleted[name]; !gone {
			n++
			last = later(last, at)
		}
	}
	return n, last
}

// gone counts the names that were seen to go and, once all have, returns the latest
// time one of them went.
func (t *tracker) gone(kind string, names []string) (int, time.Time) {
	w := t.kinds[kind]
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	n := 0
	for _, name := range names {
		if at, ok := w.deleted[name]; ok {
			n++
			last = later(last, at)
		}
	}
	return n, last
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// countTrainJobs counts the TrainJobs in the watch's cache whose status satisfies ok.
func (t *tracker) countTrainJobs(ctx context.Context, ok func(*v1.TrainJobStatus) bool) (int, error) {
	var l v1.TrainJobList
	if err := t.cache.List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	for i := range l.Items {
		if ok(&l.Items[i].Status) {
			n++
		}
	}
	return n, nil
}

// waitFor calls check every poll until it reports done, and says every 10 seconds how far
// things are.
func waitFor(ctx context.Context, poll time.Duration, what string, check func() (bool, string, error)) error {
	start, said := time.Now(), time.Now()
	for {
		done, state, err := check()
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case done:
			return nil
		case time.Since(said) >= 10*time.Second:
			progress("  %s: %s after %s", what, state, time.Since(start).Round(time.Second))
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w; last seen: %s", what, ctx.Err(), state)
		case <-time.After(poll):
		}
	}
}
