package operator

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// The pod policy is checked before every pod the operator creates, on the TrainJob as it
// reads it then, not only at admission. These tests edit the spec after admission in the
// fake client, which has no CRD to refuse the edit (the API server does, api/v1alpha1).

// privilegedTemplate is the security issue's pod template: privileged, the host's PIDs and
// its root folder.
const privilegedTemplate = `{"spec": {"hostPID": true,
	"containers": [{"name": "worker", "securityContext": {"privileged": true}, "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
	"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}`

// privilegedFields are the fields the policy names for privilegedTemplate.
var privilegedFields = []string{"spec.kubernetes.podTemplate.spec.hostPID",
	"spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged",
	"spec.kubernetes.podTemplate.spec.volumes[0].hostPath"}

// drain takes the Events recorded so far (the fake recorder blocks when its buffer is full).
func drain(rec *events.FakeRecorder) []string {
	var out []string
	for len(rec.Events) > 0 {
		out = append(out, <-rec.Events)
	}
	return out
}

// refusedFor reports what is wrong with a job the pod policy should have failed for
// fields, with notes its Events: "" when nothing is.
func refusedFor(st *v1.TrainJobStatus, notes []string, fields []string) string {
	c := meta.FindStatusCondition(st.Conditions, v1.CondFailed)
	if st.Phase != v1.PhaseFailed || c == nil || c.Reason != v1.ReasonPodPolicy {
		return "not failed with " + v1.ReasonPodPolicy
	}
	i := slices.IndexFunc(notes, func(n string) bool { return strings.Contains(n, v1.ReasonPodPolicy) })
	for _, f := range fields {
		if !strings.Contains(st.Reason, f) || !strings.Contains(c.Message, f) || i < 0 || !strings.Contains(notes[i], f) {
			return "the reason, the condition or the Event does not name " + f
		}
	}
	return ""
}

// A worker OOM-killed after the job's pod template was edited to escape the container
// is not replaced: the replacement would be privileged. The job fails naming the fields.
func TestReplacementIsChecked(t *testing.T) {
	ctx := context.Background()
	job := newTrainJob()
	job.Spec.Workers = ptr(int32(2))
	conflict := false
	r, rec := fakeReconciler(t, job, &conflict)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "mnist"}}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	pods := func() map[string]corev1.Pod {
		var l corev1.PodList
		if err := r.Client.List(ctx, &l); err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.Pod{}
		for _, p := range l.Items {
			out[p.Name] = p
		}
		return out
	}
	setPod := func(name string, change func(*corev1.PodStatus)) {
		t.Helper()
		p := pods()[name]
		change(&p.Status)
		if err := r.Client.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	running := func(st *corev1.PodStatus) {
		st.Phase = corev1.PodRunning
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	reconcile() // attempt 1
	if n := len(pods()); n != 2 {
		t.Fatalf("%d pods after the first reconcile, want 2", n)
	}
	setPod("mnist-a1-0", running)
	setPod("mnist-a1-1", running)
	reconcile()

	var tj v1.TrainJob
	if err := r.Client.Get(ctx, req.NamespacedName, &tj); err != nil {
		t.Fatal(err)
	}
	tj.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(privilegedTemplate)}
	if err := r.Client.Update(ctx, &tj); err != nil {
		t.Fatal(err)
	}
	setPod("mnist-a1-1", func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	})
	var notes []string
	for range 6 { // count the loss, delete the pod, replace it
		reconcile()
		notes = append(notes, drain(rec)...)
		for name, p := range pods() {
			if p.Spec.HostPID || p.Spec.Containers[0].SecurityContext.Privileged != nil && *p.Spec.Containers[0].SecurityContext.Privileged {
				t.Fatalf("pod %s was created privileged, with the host's PIDs", name)
			}
		}
	}
	if err := r.Client.Get(ctx, req.NamespacedName, &tj); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, ReasonReplacingWorker) }) {
		t.Fatalf("worker 1's loss was not seen (events %q): the test does not reach replaceLost", notes)
	}
	if msg := refusedFor(&tj.Status, notes, privilegedFields); msg != "" {
		t.Errorf("%s: status %+v, events %q", msg, tj.Status, notes)
	}
	if _, ok := pods()["mnist-a1-1"]; ok {
		t.Error("worker 1's pod was replaced")
	}
}

// elasticStep is a step of a running elastic gang of 2 of 4 workers, with the pod
// template tmpl ("" for none).
func elasticStep(t *testing.T, tmpl string) *step {
	t.Helper()
	job := newTrainJob()
	job.Spec.Workers, job.Spec.MinWorkers = ptr(int32(4)), ptr(int32(2))
	if tmpl != "" {
		job.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(tmpl)}
	}
	job.Status = v1.TrainJobStatus{Phase: v1.PhaseRunning, Attempt: 1, Workers: 2}
	conflict := false
	r, _ := fakeReconciler(t, job, &conflict)
	return &step{r: r, job: job, old: job.Status.DeepCopy(), now: time.Now()}
}

// stepRefused reports what is wrong with a step the pod policy should have failed for
// fields: "" when nothing is.
func stepRefused(s *step, fields []string) string {
	var notes []string
	for _, e := range s.events {
		notes = append(notes, e.reason+": "+e.msg)
	}
	return refusedFor(&s.job.Status, notes, fields)
}

// Room probes carry the worker's security context and host namespaces: a gang whose
// template was edited to escape creates none and fails; unedited, it creates them.
func TestRoomProbesAreChecked(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		tmpl   string
		probes int
	}{
		"as admitted": {"", 2},
		"edited":      {privilegedTemplate, 0},
	} {
		t.Run(name, func(t *testing.T) {
			s := elasticStep(t, tc.tmpl)
			grew, err := s.growIntoRoom(ctx, observation{})
			if err != nil {
				t.Fatal(err)
			}
			var l corev1.PodList
			if err := s.r.Client.List(ctx, &l, client.HasLabels{LabelRoomProbe}); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != tc.probes {
				t.Fatalf("%d room probes, want %d", len(l.Items), tc.probes)
			}
			if tc.probes > 0 {
				return
			}
			if !grew {
				t.Error("growIntoRoom went on after the job failed: it would write the gang running")
			}
			// A probe has no hostPath volume: the policy names what the probe has.
			if msg := stepRefused(s, privilegedFields[:2]); msg != "" {
				t.Errorf("%s: status %+v", msg, s.job.Status)
			}
		})
	}
}

// A TensorBoard reads the workers' volume at its log folder: a host folder there makes no
// TensorBoard. A running job fails; a finished one keeps its phase and gets the Event.
func TestTensorBoardIsChecked(t *testing.T) {
	ctx := context.Background()
	for name, phase := range map[string]v1.JobPhase{"running": v1.PhaseRunning, "finished": v1.PhaseSucceeded} {
		t.Run(name, func(t *testing.T) {
			s := elasticStep(t, "")
			k := s.job.Spec.Kubernetes
			k.Volumes = []corev1.Volume{{Name: "runs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			k.VolumeMounts = []corev1.VolumeMount{{Name: "runs", MountPath: "/runs"}}
			k.TensorBoard = &v1.TensorBoardSpec{LogDir: "/runs/logs"}
			s.job.Status.Phase = phase
			if err := s.tensorBoard(ctx); err != nil {
				t.Fatal(err)
			}
			var l appsv1.DeploymentList
			if err := s.r.Client.List(ctx, &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != 0 {
				t.Fatal("the TensorBoard Deployment was created")
			}
			field := "spec.kubernetes.volumes[0].hostPath"
			if phase == v1.PhaseRunning {
				if msg := stepRefused(s, []string{field}); msg != "" {
					t.Errorf("%s: status %+v", msg, s.job.Status)
				}
				return
			}
			if s.job.Status.Phase != phase || len(s.events) != 1 || s.events[0].reason != v1.ReasonPodPolicy || !strings.Contains(s.events[0].msg, field) {
				t.Errorf("phase %s, events %+v; want %s kept and one %s Event naming %s", s.job.Status.Phase, s.events, phase, v1.ReasonPodPolicy, field)
			}
		})
	}
}

// A Kueue Workload's template is the workers' pod: a Workload slice asked for after the
// template was edited is not created, and the job fails.
func TestWorkloadTemplateIsChecked(t *testing.T) {
	s := elasticStep(t, privilegedTemplate)
	s.job.Spec.Kubernetes.QueueName = "team-a"
	wl, err := s.newWorkload(context.Background(), 2, 3)
	if err != nil || wl != nil {
		t.Fatalf("newWorkload: %v, %v; want no Workload and no error", wl, err)
	}
	if msg := stepRefused(s, privilegedFields); msg != "" {
		t.Errorf("%s: status %+v", msg, s.job.Status)
	}
}

// Every object the operator creates is created in one of these functions; those that
// make pods, or templates of pods, pass them through checkPods first (or newWorkload,
// which does). A new Create elsewhere fails this test until it is listed here, checked
// when it makes pods.
func TestEveryPodCreationIsChecked(t *testing.T) {
	want := map[string]bool{ // function that creates -> it checks
		"createPods": true, "createProbes": true, "tensorBoard": true, "createWorkload": true, "askForSlice": true,
		"create": false, "networkPolicy": false, "gangSecret": false, // a Service, a NetworkPolicy, a Secret
		"podGroup": false, // a PodGroup
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	got := map[string]bool{}
	checksWorkload := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			creates, checks := false, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						creates = creates || sel.Sel.Name == "Create" && strings.HasSuffix(exprString(sel.X), "Client")
						checks = checks || sel.Sel.Name == "checkPods" || sel.Sel.Name == "newWorkload"
					}
				}
				return true
			})
			if creates {
				got[fn.Name.Name] = checks
			}
			if fn.Name.Name == "newWorkload" {
				checksWorkload = checks
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("functions that create objects, and whether they check them with checkPods (-want +got):\n%s\n"+
			"a new Create that makes a pod (or a template of one) must pass it through checkPods first; then list it here", diff)
	}
	if !checksWorkload {
		t.Error("newWorkload does not check the Workload's pod template with checkPods")
	}
}

// exprString is the source of a selector's receiver, such as s.r.Client.
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return ""
}
