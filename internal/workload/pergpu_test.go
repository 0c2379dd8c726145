package workload

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A worker with N GPUs requests N times the CPU and memory per GPU that its job leaves
// unset, as requests only (Burstable, never a limit it did not choose); what the job sets
// (spec.resources, or the worker container's requests or limits in the pod template)
// wins, a zero amount adds nothing, and a worker without GPUs gets none.
func TestRenderPerGPU(t *testing.T) {
	small := PerGPU{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi")}
	type want struct{ requests, limits map[string]string }
	cases := map[string]struct {
		gpus     int32
		cpu, mem string // spec.resources
		template string // spec.kubernetes.podTemplate
		perGPU   PerGPU
		want     want
	}{
		"built-in defaults, 1 GPU": {gpus: 1, perGPU: DefaultPerGPU(), want: want{
			requests: map[string]string{"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
			limits:   map[string]string{"nvidia.com/gpu": "1"}}},
		"built-in defaults, 4 GPUs": {gpus: 4, perGPU: DefaultPerGPU(), want: want{
			requests: map[string]string{"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"},
			limits:   map[string]string{"nvidia.com/gpu": "4"}}},
		"small defaults, 3 GPUs": {gpus: 3, perGPU: small, want: want{
			requests: map[string]string{"cpu": "300m", "memory": "192Mi", "nvidia.com/gpu": "3"},
			limits:   map[string]string{"nvidia.com/gpu": "3"}}},
		"the spec's CPU wins, memory defaulted": {gpus: 2, cpu: "6", perGPU: DefaultPerGPU(), want: want{
			requests: map[string]string{"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "2"},
			limits:   map[string]string{"nvidia.com/gpu": "2"}}},
		"the spec's memory wins, CPU defaulted": {gpus: 2, mem: "100Gi", perGPU: DefaultPerGPU(), want: want{
			requests: map[string]string{"cpu": "4", "memory": "100Gi", "nvidia.com/gpu": "2"},
			limits:   map[string]string{"memory": "100Gi", "nvidia.com/gpu": "2"}}},
		"the template's limit wins (Kubernetes makes it the request)": {gpus: 1, perGPU: DefaultPerGPU(),
			template: `{"spec": {"containers": [{"name": "worker", "resources": {"limits": {"cpu": "1", "memory": "4Gi"}}}]}}`,
			want: want{requests: map[string]string{"nvidia.com/gpu": "1"},
				limits: map[string]string{"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"}}},
		"the template's request wins": {gpus: 1, perGPU: DefaultPerGPU(),
			template: `{"spec": {"containers": [{"name": "worker", "resources": {"requests": {"memory": "2Gi"}}}]}}`,
			want: want{requests: map[string]string{"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"},
				limits: map[string]string{"nvidia.com/gpu": "1"}}},
		"0 CPU per GPU: no CPU default": {gpus: 2, perGPU: PerGPU{Memory: resource.MustParse("1Gi")}, want: want{
			requests: map[string]string{"memory": "2Gi", "nvidia.com/gpu": "2"},
			limits:   map[string]string{"nvidia.com/gpu": "2"}}},
		"no defaults (the zero value)": {gpus: 2, want: want{
			requests: map[string]string{"nvidia.com/gpu": "2"},
			limits:   map[string]string{"nvidia.com/gpu": "2"}}},
		"no GPUs: nothing added":  {perGPU: DefaultPerGPU()},
		"no GPUs, the spec's CPU": {cpu: "3", perGPU: DefaultPerGPU(), want: want{requests: map[string]string{"cpu": "3"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := baseJob()
			j.Spec.Resources.GPU = tc.gpus
			if tc.cpu != "" {
				j.Spec.Resources.CPU = ptr(resource.MustParse(tc.cpu))
			}
			if tc.mem != "" {
				j.Spec.Resources.Memory = ptr(resource.MustParse(tc.mem))
			}
			if tc.template != "" {
				j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(tc.template)}
			}
			a, err := Render(j, 1, Options{Image: "img", PerGPU: tc.perGPU})
			if err != nil {
				t.Fatal(err)
			}
			r := a.Pod(0).Spec.Containers[0].Resources
			got := want{requests: amounts(r.Requests), limits: amounts(r.Limits)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("worker resources (-want +got):\n%s", diff)
			}
			if init := a.Template.Spec.InitContainers[0].Resources.Requests; init.Cpu().String() != "10m" {
				t.Errorf("the init container's CPU request %s changed, want 10m", init.Cpu())
			}
		})
	}
	// The defaults are the operator's rendering, not the job: the workers' copy of the
	// spec stays as the user wrote it (their OMP_NUM_THREADS follows the container's
	// request through EnvMilliCPU).
	j := baseJob()
	j.Spec.Resources.GPU = 1
	a, err := Render(j, 1, Options{Image: "img", PerGPU: DefaultPerGPU()})
	if err != nil {
		t.Fatal(err)
	}
	var job v1.TrainJob
	if err := json.Unmarshal([]byte(envMap(a.Template.Spec.Containers[0].Env)[EnvJob]), &job); err != nil || job.Spec.Resources.CPU != nil {
		t.Errorf("the workers' job: CPU %v (%v), want none", job.Spec.Resources.CPU, err)
	}
}

func amounts(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := map[string]string{}
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// The per-GPU amounts of the operator's flags: an error says what is wrong and what
// would do.
func TestParsePerGPU(t *testing.T) {
	cases := map[string]struct {
		parse   func(string) (resource.Quantity, error)
		in      string
		want    string
		wantErr string
	}{
		"cores":                {ParseCPUPerGPU, "4", "4", ""},
		"millicores":           {ParseCPUPerGPU, "100m", "100m", ""},
		"half a core":          {ParseCPUPerGPU, "0.5", "500m", ""},
		"no CPU default":       {ParseCPUPerGPU, "0", "0", ""},
		"negative CPU":         {ParseCPUPerGPU, "-1", "", `"-1": must not be negative ("0" for none)`},
		"CPU not an amount":    {ParseCPUPerGPU, "four", "", `"four" is not an amount such as 2 or 500m`},
		"CPU below 1m":         {ParseCPUPerGPU, "100u", "", `"100u": CPU is counted in millicores (1m at least)`},
		"empty CPU":            {ParseCPUPerGPU, "", "", `empty: give an amount such as 2 or 500m, or "0" for none`},
		"gibibytes":            {ParseMemoryPerGPU, "16Gi", "16Gi", ""},
		"gigabytes":            {ParseMemoryPerGPU, "16G", "16G", ""},
		"no memory default":    {ParseMemoryPerGPU, "0", "0", ""},
		"memory with a B":      {ParseMemoryPerGPU, "8GB", "", `"8GB" is not an amount such as 8Gi or 512Mi`},
		"negative memory":      {ParseMemoryPerGPU, "-8Gi", "", `"-8Gi": must not be negative`},
		"a fraction of a byte": {ParseMemoryPerGPU, "0.5", "", `"0.5": memory is a whole number of bytes`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, err := tc.parse(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%q: error %v, want one with %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || q.String() != tc.want {
				t.Errorf("%q: %s, %v; want %s", tc.in, q.String(), err, tc.want)
			}
		})
	}
}
