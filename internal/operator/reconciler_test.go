package operator

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// fakeReconciler is a Reconciler on controller-runtime's fake client holding job, whose
// status writes fail with a conflict while conflict is true.
func fakeReconciler(t *testing.T, job *v1.TrainJob, conflict *bool) (*Reconciler, *events.FakeRecorder) {
	t.Helper()
	byUID := func(obj client.Object) []string {
		if uid := obj.GetLabels()[workload.LabelJobUID]; uid != "" {
			return []string{uid}
		}
		return nil
	}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(job).WithStatusSubresource(job).
		WithIndex(&corev1.Service{}, uidIndex, byUID).WithIndex(&corev1.Pod{}, uidIndex, byUID).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if *conflict {
				return apierrors.NewConflict(schema.GroupResource{Group: v1.GroupVersion.Group, Resource: "trainjobs"}, obj.GetName(), errors.New("changed"))
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	rec := events.NewFakeRecorder(10)
	return &Reconciler{Client: c, Reader: c, Recorder: rec, Options: Options{Image: "trainyard:test"}}, rec
}

func newTrainJob() *v1.TrainJob {
	return &v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "default", UID: "uid-1"},
		Spec: v1.TrainJobSpec{Command: []string{"python3", "train.py"},
			Kubernetes: &v1.KubernetesSpec{Image: "worker:1"}},
	}
}

// Events are recorded only once the status they go with is written: a write that
// conflicts is retried from scratch, and would record them twice.
func TestEventsWaitForTheStatusWrite(t *testing.T) {
	conflict := false
	job := newTrainJob()
	job.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "nope"}}}}
	r, rec := fakeReconciler(t, job, &conflict)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "mnist"}}
	if _, err := r.Reconcile(context.Background(), req); err != nil { // creates attempt 1
		t.Fatal(err)
	}
	if ev := <-rec.Events; !strings.Contains(ev, "AttemptCreated") {
		t.Fatalf("first event %q", ev)
	}
	for len(rec.Events) > 0 { // and the warning that the storage path is not on a volume
		<-rec.Events
	}
	conflict = true
	res, err := r.Reconcile(context.Background(), req) // finds MissingVolume; the write conflicts
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a conflicting status write: result %+v, error %v; want a retry after a pause", res, err)
	}
	if n := len(rec.Events); n != 0 {
		t.Fatalf("%d events recorded although the status write failed: %s", n, <-rec.Events)
	}
	conflict = false
	if _, err := r.Reconcile(context.Background(), req); err != nil { // the same, written
		t.Fatal(err)
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events after the write; want one MissingVolume", n)
	}
	if ev := <-rec.Events; !strings.Contains(ev, "MissingVolume") {
		t.Errorf("event %q; want MissingVolume", ev)
	}
}

// A deleted TrainJob leaves nothing in the reconciler's per-job memory.
func TestDeletedJobIsForgotten(t *testing.T) {
	conflict := false
	job := newTrainJob()
	r, _ := fakeReconciler(t, job, &conflict)
	key := types.NamespacedName{Namespace: "default", Name: "mnist"}
	r.poller = newPoller(func(context.Context, string) (*workload.Summary, error) { return nil, nil }, 1)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	r.polled.Store(job.UID, time.Now())
	r.checked.Store(job.UID, configCheck{})
	if _, ok := r.written.Load(job.UID); !ok {
		t.Fatal("the status write was not remembered")
	}
	if err := r.Client.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]interface{ Load(any) (any, bool) }{"written": &r.written, "polled": &r.polled, "checked": &r.checked, "uids": &r.uids} {
		if _, ok := m.Load(job.UID); ok {
			t.Errorf("%s still holds the deleted job", name)
		}
	}
	if _, ok := r.uids.Load(key); ok {
		t.Error("uids still holds the deleted job's name")
	}
}

// The poller reads outside Reconcile: one read per job at a time, a full queue drops
// the request (never blocks), and a read's summary wakes the job and is taken once.
func TestPollerReadsOutsideReconcile(t *testing.T) {
	release := make(chan struct{})
	reads := make(chan string, 10)
	p := newPoller(func(ctx context.Context, url string) (*workload.Summary, error) {
		reads <- url
		<-release
		return &workload.Summary{Iteration: 7}, nil
	}, 1)
	job := newTrainJob()
	p.want(job, "http://w0/progress")
	p.want(job, "http://w0/progress") // under way: not asked twice
	if len(p.queue) != 1 {
		t.Fatalf("queue holds %d requests; want 1", len(p.queue))
	}
	for i := range pollQueue + 5 { // never blocks, even when full
		other := newTrainJob()
		other.UID = types.UID("other-" + string(rune('a'+i%26)) + http.StatusText(200) + time.Duration(i).String())
		p.want(other, "http://x")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Start(ctx)
	if got := <-reads; got != "http://w0/progress" {
		t.Fatalf("read %s", got)
	}
	close(release)
	select {
	case ev := <-p.events:
		if ev.Object.GetName() != "mnist" || ev.Object.GetNamespace() != "default" {
			t.Errorf("event for %s/%s", ev.Object.GetNamespace(), ev.Object.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after a read")
	}
	if s := p.take(job.UID); s == nil || s.Iteration != 7 {
		t.Fatalf("take: %+v", s)
	}
	if s := p.take(job.UID); s != nil {
		t.Errorf("a summary was taken twice: %+v", s)
	}
}

// A job the pod policy refuses fails in one reconcile with nothing created and its Event
// recorded after the status; with --pod-policy=off, an administrator's choice, the same
// job's attempt is created.
func TestPodPolicyLevels(t *testing.T) {
	escape := func() *v1.TrainJob {
		job := newTrainJob()
		job.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"spec": {"hostPID": true,
			"containers": [{"name": "worker", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}}`)}
		return job
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "mnist"}}
	for level, wantJob := range map[podpolicy.Level]bool{"": false, podpolicy.Restricted: false, podpolicy.Off: true} {
		conflict := false
		r, rec := fakeReconciler(t, escape(), &conflict)
		r.Options.PodPolicy = level
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		var jobs corev1.PodList
		if err := r.Client.List(context.Background(), &jobs); err != nil {
			t.Fatal(err)
		}
		var got v1.TrainJob
		if err := r.Client.Get(context.Background(), req.NamespacedName, &got); err != nil {
			t.Fatal(err)
		}
		if (len(jobs.Items) > 0) != wantJob {
			t.Errorf("pod policy %q: %d pods created, want them: %v (status %+v)", level, len(jobs.Items), wantJob, got.Status)
		}
		if wantJob {
			continue
		}
		if got.Status.Phase != v1.PhaseFailed || !strings.Contains(got.Status.Reason, "spec.kubernetes.podTemplate.spec.hostPID") ||
			!strings.Contains(got.Status.Reason, "spec.kubernetes.podTemplate.spec.containers[0].securityContext.capabilities.add[0]") {
			t.Errorf("pod policy %q: status %+v", level, got.Status)
		}
		if ev := <-rec.Events; !strings.Contains(ev, v1.ReasonPodPolicy) || !strings.Contains(ev, "hostPID") {
			t.Errorf("event %q", ev)
		}
	}
}

// A read under way when the gang changed (discard: a readmit) brings nothing: it would
// name the readmitted workers dropped still. A read that starts after is taken.
func TestPollerDiscardsReadsFromBefore(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	n := 0
	p := newPoller(func(ctx context.Context, url string) (*workload.Summary, error) {
		n++
		started <- struct{}{}
		<-release
		return &workload.Summary{Iteration: int64(n), Dropped: []int{2}}, nil
	}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Start(ctx)
	job := newTrainJob()
	p.want(job, "http://w0/progress")
	<-started
	p.discard(job.UID)
	release <- struct{}{}
	waitFor := func(ok func() bool) {
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("timed out")
			}
		}
	}
	waitFor(func() bool { p.mu.Lock(); defer p.mu.Unlock(); return !p.pending[job.UID] })
	if s := p.take(job.UID); s != nil {
		t.Fatalf("took %+v, read before the discard; want nothing", s)
	}
	time.Sleep(2 * time.Millisecond) // a clock that moves on
	p.want(job, "http://w0/progress")
	<-started
	close(release)
	waitFor(func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.latest[job.UID] != nil })
	if s := p.take(job.UID); s == nil || s.Iteration != 2 {
		t.Fatalf("took %+v; want the read made after the discard", s)
	}
}

// A reconcile that judges a stale TrainJob deletes no room probe: not when its status
// write conflicts, nor when it writes nothing while the API server holds a newer
// TrainJob. A reconcile of the latest one deletes a suspended gang's probes.
func TestStaleReconcileKeepsRoomProbes(t *testing.T) {
	ctx := context.Background()
	conflict := true
	job := newTrainJob()
	job.Spec.Suspend = true
	r, _ := fakeReconciler(t, job, &conflict)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "mnist"}}
	probe := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mnist-room-0", Namespace: "default",
			Labels: map[string]string{LabelRoomProbe: "true", workload.LabelJobUID: string(job.UID)}}}
	}
	probed := func() bool {
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(probe()), &corev1.Pod{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if err := r.Client.Create(ctx, probe()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if !probed() {
		t.Fatal("a reconcile whose status write conflicted deleted the room probe")
	}
	conflict = false
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if probed() {
		t.Fatal("the suspended gang's room probe is left after its status was written")
	}

	// The cache is one write behind: the step reads the TrainJob as it was, and its status
	// (suspended) needs no write.
	var stale v1.TrainJob
	if err := r.Client.Get(ctx, req.NamespacedName, &stale); err != nil {
		t.Fatal(err)
	}
	newer := stale.DeepCopy()
	newer.Labels = map[string]string{"touched": "yes"}
	if err := r.Client.Update(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Create(ctx, probe()); err != nil {
		t.Fatal(err)
	}
	cached := interceptor.NewClient(r.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if j, ok := obj.(*v1.TrainJob); ok {
				stale.DeepCopyInto(j)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	behind := &Reconciler{Client: cached, Reader: r.Client, Options: r.Options}
	res, err := behind.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !probed() {
		t.Fatal("a reconcile of a stale TrainJob deleted the room probe")
	}
	if res.RequeueAfter == 0 {
		t.Error("the stale reconcile asks for no retry")
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if probed() {
		t.Fatal("the room probe is left after a reconcile of the latest TrainJob")
	}
}
