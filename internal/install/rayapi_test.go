package install

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rayObjects are the rendered objects of the Ray API's namespace.
func rayObjects(objs []*unstructured.Unstructured, ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() == RayAPIName && o.GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out
}

// --ray-api-image adds Ray's Jobs API: a server in the training image with the trainyard
// binary copied in, on the claim, with a Role for TrainJobs in its namespace only.
func TestRenderRayAPI(t *testing.T) {
	objs, err := Render(Options{Image: "registry.local/trainyard:v1", RayAPI: RayAPI{Image: "registry.local/train:3", Claim: "team-data", Namespace: "team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range rayObjects(objs, "team-a") {
		kinds = append(kinds, o.GetKind())
	}
	if want := []string{"ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"}; !slices.Equal(kinds, want) {
		t.Fatalf("Ray API objects %v, want %v", kinds, want)
	}
	var dep *unstructured.Unstructured
	for _, o := range rayObjects(objs, "team-a") {
		if o.GetKind() == "Deployment" {
			dep = o
		}
	}
	d := typed[appsv1.Deployment](t, dep)
	pod := d.Spec.Template.Spec
	server := pod.Containers[0]
	if pod.InitContainers[0].Image != "registry.local/trainyard:v1" || server.Image != "registry.local/train:3" || server.Command[0] != "/trainyard/trainyard" {
		t.Errorf("init %s, server %s %v: want trainyard copied into the training image", pod.InitContainers[0].Image, server.Image, server.Command)
	}
	if pod.Volumes[2].PersistentVolumeClaim == nil || pod.Volumes[2].PersistentVolumeClaim.ClaimName != "team-data" {
		t.Errorf("volumes %+v: want the claim team-data", pod.Volumes)
	}
	var gang map[string]string
	if err := json.Unmarshal([]byte(server.Env[0].Value), &gang); err != nil || gang["namespace"] != "team-a" || gang["mountPath"] != "/shared" || gang["claim"] != "team-data" {
		t.Errorf("%s=%s (%v): want where the gangs run", server.Env[0].Name, server.Env[0].Value, err)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s: one server at a time uses the state folder", d.Spec.Strategy.Type)
	}
	var role *unstructured.Unstructured
	for _, o := range rayObjects(objs, "team-a") {
		if o.GetKind() == "Role" {
			role = o
		}
	}
	for _, r := range typed[rbacv1.Role](t, role).Rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "secrets") {
			t.Errorf("the Ray API's Role grants %v on %v", r.Verbs, r.Resources)
		}
	}
	// Without the flags, none of it.
	plain, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rayObjects(plain, "default")); n != 0 {
		t.Errorf("%d Ray API objects without --ray-api-image", n)
	}
}

func TestRayAPIOptionsRefused(t *testing.T) {
	cases := map[string]struct {
		r    RayAPI
		flag string
		want string
	}{
		"no claim":      {RayAPI{Image: "train:1"}, "--ray-api-claim", "give a PersistentVolumeClaim"},
		"no image":      {RayAPI{Claim: "data"}, "--ray-api-image", "give the training image"},
		"bad claim":     {RayAPI{Image: "train:1", Claim: "Data_1"}, "--ray-api-claim", "not a claim name"},
		"bad image":     {RayAPI{Image: "Train::1", Claim: "data"}, "--ray-api-image", ""},
		"relative path": {RayAPI{Image: "train:1", Claim: "data", MountPath: "shared"}, "--ray-api-mount", "absolute folder"},
		"root":          {RayAPI{Image: "train:1", Claim: "data", MountPath: "/"}, "--ray-api-mount", "absolute folder"},
		"namespace":     {RayAPI{Image: "train:1", Claim: "data", Namespace: "Team A"}, "--ray-api-namespace", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := Options{RayAPI: c.r}.Validate()
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Flag != c.flag || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate: %v; want an error of %s saying %q", err, c.flag, c.want)
			}
		})
	}
}
