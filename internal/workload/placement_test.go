package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestPlacement(t *testing.T) {
	gpu := corev1.Toleration{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	cases := map[string]struct {
		placement    *Placement
		wantSelector map[string]string
		wantTols     []corev1.Toleration
	}{
		"none": {
			wantSelector: map[string]string{"zone": "a"},
			wantTols:     []corev1.Toleration{gpu},
		},
		"a flavor's labels and taints": {
			placement:    &Placement{NodeSelector: map[string]string{"pool": "h100", "zone": "b"}, Tolerations: []corev1.Toleration{spot, gpu}},
			wantSelector: map[string]string{"pool": "h100", "zone": "b"},
			wantTols:     []corev1.Toleration{gpu, spot},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := baseJob()
			job.Spec.Resources.GPU = 1
			job.Spec.Kubernetes.NodeSelector = map[string]string{"zone": "a"}
			a, err := Render(job, 1, Options{Image: "img", Placement: tc.placement})
			if err != nil {
				t.Fatal(err)
			}
			pod := a.Pod(0).Spec
			if diff := cmp.Diff(tc.wantSelector, pod.NodeSelector); diff != "" {
				t.Errorf("node selector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTols, pod.Tolerations); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
			if job.Spec.Kubernetes.NodeSelector["zone"] != "a" {
				t.Error("the placement changed the TrainJob's own node selector")
			}
		})
	}
}
