package install

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/auth"
)

// RayAPI is Ray's Jobs API and the dashboard served in the cluster (install --ray-api):
// `trainyard server` in a pod of the training image, whose jobs' gangs run as TrainJobs.
// The zero value installs none.
type RayAPI struct {
	// Image is the training image (Python, torch, the user's packages) the server, its
	// drivers and its gangs' workers run in, as a KubeRay cluster's head and workers do.
	Image string
	// PullPolicy of Image; empty means IfNotPresent.
	PullPolicy corev1.PullPolicy
	// Namespace of the server and its gangs' TrainJobs; empty means "default".
	Namespace string
	// Claim is a PersistentVolumeClaim (ReadWriteMany where the pods spread over nodes)
	// mounted at MountPath in the server's pod and its gangs' workers: the server's state,
	// the uploaded working folders and the runs.
	Claim string
	// MountPath is where; empty means DefaultRayAPIMount.
	MountPath string
	// Name of its objects; set by withDefaults.
	Name string
	// GangCluster is the server's TRAINYARD_GANG_CLUSTER (cli.ClusterGang); set by
	// withDefaults.
	GangCluster string
}

// DefaultRayAPIMount is where the Ray API's claim is mounted when RayAPI.MountPath is empty.
const DefaultRayAPIMount = "/shared"

// RayAPIName names the Ray API's objects.
const RayAPIName = "trainyard-ray-api"

// rayAPIManifest is the template of the Ray API's objects.
const rayAPIManifest = "rayapi/rayapi.yaml"

// enabled reports whether the Ray API is to be installed.
func (r RayAPI) enabled() bool { return r.Image != "" || r.Claim != "" }

func (r RayAPI) withDefaults() RayAPI {
	if r.Namespace == "" {
		r.Namespace = "default"
	}
	if r.PullPolicy == "" {
		r.PullPolicy = corev1.PullIfNotPresent
	}
	if r.MountPath == "" {
		r.MountPath = DefaultRayAPIMount
	}
	r.Name = RayAPIName
	gang, _ := json.Marshal(map[string]string{"namespace": r.Namespace, "image": r.Image, "claim": r.Claim, "mountPath": r.MountPath})
	r.GangCluster = string(gang)
	return r
}

// validate checks the Ray API's options, each error naming its flag.
func (r RayAPI) validate() []error {
	if !r.enabled() {
		return nil
	}
	r = r.withDefaults()
	var errs []error
	if r.Image == "" {
		errs = append(errs, &OptionError{"--ray-api-image", fmt.Errorf("give the training image the Jobs API's drivers and gangs run in " +
			"(Python, torch and your packages; trainyard is copied in), as a KubeRay cluster's image")})
	} else if err := ValidateImage(r.Image); err != nil {
		errs = append(errs, &OptionError{"--ray-api-image", err})
	}
	if r.Claim == "" {
		errs = append(errs, &OptionError{"--ray-api-claim", fmt.Errorf("give a PersistentVolumeClaim (ReadWriteMany across nodes) for the " +
			"server's state, the uploaded working folders and the runs: the drivers and the gangs' workers both mount it")})
	} else if msgs := validation.IsDNS1123Subdomain(r.Claim); len(msgs) > 0 {
		errs = append(errs, &OptionError{"--ray-api-claim", fmt.Errorf("%q: not a claim name: %s", r.Claim, strings.Join(msgs, "; "))})
	}
	if err := ValidateNamespace(r.Namespace); err != nil {
		errs = append(errs, &OptionError{"--ray-api-namespace", err})
	}
	if !path.IsAbs(r.MountPath) || path.Clean(r.MountPath) != r.MountPath || r.MountPath == "/" {
		errs = append(errs, &OptionError{"--ray-api-mount", fmt.Errorf("%q: give an absolute folder other than /, such as %s", r.MountPath, DefaultRayAPIMount)})
	}
	switch r.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, &OptionError{"--ray-api-image-pull-policy", fmt.Errorf("%q: must be Always, IfNotPresent or Never", r.PullPolicy)})
	}
	return errs
}

// ensureRayAPIToken makes the Secret of the Ray API's token unless it exists: a token
// made once (a new one at every install would lock out every client).
func (t Target) ensureRayAPIToken(ctx context.Context, r RayAPI) (string, error) {
	name := r.Name + "-token"
	var s corev1.Secret
	err := t.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, &s)
	if err == nil {
		return "unchanged", nil
	}
	if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("get Secret %s/%s: %w", r.Namespace, name, err)
	}
	token, err := auth.NewToken()
	if err != nil {
		return "", err
	}
	s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace,
		Labels: map[string]string{LabelName: "trainyard", LabelManagedBy: ManagedBy}},
		StringData: map[string]string{"token": token}}
	if err := t.Client.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create Secret %s/%s: %w", r.Namespace, name, err)
	}
	return "created", nil
}

// rayAPIObjects are the objects of the Ray API installed in namespace ns ("" means
// "default"), with its token's Secret, for uninstall; none when it is not installed there.
func (t Target) rayAPIObjects(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	r := RayAPI{Namespace: ns, Image: "placeholder", Claim: "placeholder"}.withDefaults()
	dep := newObject(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, r.Namespace, r.Name)
	switch err := t.Client.Get(ctx, client.ObjectKeyFromObject(dep), dep); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, explain("get", dep, err)
	}
	objs, err := renderTemplate(rayAPIManifest, Options{RayAPI: r}.withDefaults())
	if err != nil {
		return nil, err
	}
	secret := newObject(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, r.Namespace, r.Name+"-token")
	return append(objs, secret), nil
}
