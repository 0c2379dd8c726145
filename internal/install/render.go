package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/config"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// Defaults of Options.
const (
	DefaultNamespace = "trainyard-system"
	// ImageRepository is the repository of the published trainyard image.
	ImageRepository = "ghcr.io/trainyard/trainyard"
	// Name names the operator's ServiceAccount, ClusterRole, ClusterRoleBinding,
	// Deployment, and the Role and RoleBinding of a watched namespace.
	Name = "trainyard-operator"
	// FieldManager is the server-side apply field manager of install.
	FieldManager = "trainyard"
)

// Labels on every object install makes.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "trainyard"
)

// The manifests, in the order they are applied. Uninstall deletes in the reverse order.
var manifests = []string{
	"manager/namespace.yaml",
	"crd/bases/trainyard.dev_trainjobs.yaml",
	roleManifest,
	"manager/metrics_reader_role.yaml",
	"manager/room_probe_priority_class.yaml",
	"manager/service_account.yaml",
	"manager/cluster_role_binding.yaml",
	"manager/role_bindings.yaml",
	"manager/deployment.yaml",
}

// roleManifest is the generated ClusterRole, split by splitRole for one namespace.
const roleManifest = "rbac/role.yaml"

// Options say what to install. The zero value installs one replica of DefaultImage("")
// (the latest release) into DefaultNamespace.
type Options struct {
	// Namespace holds the operator; empty means DefaultNamespace.
	Namespace string
	// Image is the trainyard image the operator runs and gives workers; empty means
	// DefaultImage("").
	Image string
	// Replicas of the operator (one leads, the others wait); 0 means 1.
	Replicas int32
	// PullPolicy of the operator's image; empty means IfNotPresent.
	PullPolicy corev1.PullPolicy
	// WatchNamespace limits the operator to the TrainJobs of one namespace, with Roles
	// there instead of a ClusterRole for all but what is cluster-wide; empty: every
	// namespace.
	WatchNamespace string
	// PodPolicy is the operator's pod policy; empty means podpolicy.Default (restricted).
	PodPolicy podpolicy.Level
	// APIServerCIDRs are where the API server's proxy connects to pods from (the
	// operator's --api-server-cidr); empty: the operator looks them up.
	APIServerCIDRs []string
	// WorkerCPUPerGPU and WorkerMemoryPerGPU are the requests per GPU of a worker whose
	// TrainJob names no CPU or memory (the operator's --worker-cpu-per-gpu and
	// --worker-memory-per-gpu; "0": none); empty means workload.DefaultCPUPerGPU and
	// workload.DefaultMemoryPerGPU.
	WorkerCPUPerGPU, WorkerMemoryPerGPU string
	// RoomProbeImage is the image of the operator's room probes (its --room-probe-image);
	// empty: the operator's default, operator.DefaultRoomProbeImage.
	RoomProbeImage string
	// RayAPI is Ray's Jobs API served in the cluster (rayapi.go); the zero value installs
	// none.
	RayAPI RayAPI
}

// DefaultImage is the published image of a trainyard version: ImageRepository tagged with
// the version if it is a release (IsRelease), else "latest".
func DefaultImage(version string) string {
	if !IsRelease(version) {
		version = "latest"
	}
	return ImageRepository + ":" + version
}

// releaseRE matches the versions of releases, which have published images: v1.2.3,
// v1.2.3-rc.1; not a development build's "dev" or `git describe`'s v1.2.3-4-gabcdef0.
var releaseRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)(\.?[0-9]+)*)?$`)

// IsRelease says whether a trainyard version is a release, with a published image.
func IsRelease(version string) bool { return releaseRE.MatchString(version) }

// withDefaults fills in what the options leave empty.
func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Image == "" {
		o.Image = DefaultImage("")
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.PullPolicy == "" {
		o.PullPolicy = corev1.PullIfNotPresent
	}
	if o.PodPolicy == "" {
		o.PodPolicy = podpolicy.Default
	}
	if o.WorkerCPUPerGPU == "" {
		o.WorkerCPUPerGPU = workload.DefaultCPUPerGPU
	}
	if o.WorkerMemoryPerGPU == "" {
		o.WorkerMemoryPerGPU = workload.DefaultMemoryPerGPU
	}
	if o.RayAPI.enabled() {
		o.RayAPI = o.RayAPI.withDefaults()
	}
	return o
}

// OptionError is bad options: nothing was rendered or sent.
type OptionError struct {
	Flag string // the option's command-line flag, e.g. "--image"
	Err  error
}

func (e *OptionError) Error() string { return e.Flag + ": " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// Validate checks the options, each error naming the flag that sets the option.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if err := ValidateNamespace(o.Namespace); err != nil {
		errs = append(errs, &OptionError{"--namespace", err})
	}
	if err := ValidateImage(o.Image); err != nil {
		errs = append(errs, &OptionError{"--image", err})
	}
	if o.Replicas < 0 {
		errs = append(errs, &OptionError{"--replicas", fmt.Errorf("%d: must be at least 1", o.Replicas)})
	}
	switch o.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, &OptionError{"--image-pull-policy", fmt.Errorf("%q: must be Always, IfNotPresent or Never", o.PullPolicy)})
	}
	if o.WatchNamespace != "" {
		if err := ValidateNamespace(o.WatchNamespace); err != nil {
			errs = append(errs, &OptionError{"--watch-namespace", err})
		}
	}
	if _, err := podpolicy.ParseLevel(string(o.PodPolicy)); err != nil {
		errs = append(errs, &OptionError{"--pod-policy", err})
	}
	for _, cidr := range o.APIServerCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			errs = append(errs, &OptionError{"--api-server-cidr", fmt.Errorf("%q: not a CIDR such as 10.0.0.1/32", cidr)})
		}
	}
	if o.RoomProbeImage != "" {
		if err := ValidateImage(o.RoomProbeImage); err != nil {
			errs = append(errs, &OptionError{"--room-probe-image", err})
		}
	}
	if _, err := workload.ParseCPUPerGPU(o.WorkerCPUPerGPU); err != nil {
		errs = append(errs, &OptionError{"--worker-cpu-per-gpu", err})
	}
	if _, err := workload.ParseMemoryPerGPU(o.WorkerMemoryPerGPU); err != nil {
		errs = append(errs, &OptionError{"--worker-memory-per-gpu", err})
	}
	errs = append(errs, o.RayAPI.validate()...)
	return errors.Join(errs...)
}

// Image references, after the grammar of github.com/distribution/reference (without IPv6
// registry addresses): [registry[:port]/]path[:tag][@digest].
var (
	domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	pathComponent   = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	tag             = `[\w][\w.-]{0,127}`
	digest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	imageRE         = regexp.MustCompile(`^(?:` + domainComponent + `(?:\.` + domainComponent + `)*(?::[0-9]+)?/)?` +
		pathComponent + `(?:/` + pathComponent + `)*(?::` + tag + `)?(?:@` + digest + `)?$`)
)

// ValidateNamespace checks a namespace's name.
func ValidateNamespace(ns string) error {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return fmt.Errorf("%q is not a valid namespace name: %s", ns, strings.Join(msgs, "; "))
	}
	return nil
}

// ValidateImage checks an image reference's syntax.
func ValidateImage(image string) error {
	if image == "" || !imageRE.MatchString(image) {
		hint := ""
		if strings.ContainsAny(image, " \t\n") {
			hint = ": it has white space"
		} else if path, _, _ := strings.Cut(image, "@"); strings.ToLower(path) != path {
			hint = ": repository names are lower case"
		}
		return fmt.Errorf("%q is not an image reference like %s%s", image, DefaultImage("v1.2.3"), hint)
	}
	if name, _, _ := strings.Cut(image, "@"); len(name) > 255 {
		return fmt.Errorf("%q is longer than 255 characters", image)
	}
	return nil
}

// templateData is what the templates in config/manager see.
type templateData struct {
	Options
	Name string
}

// Render returns the objects install applies, in order, each labeled as trainyard's.
func Render(opts Options) ([]*unstructured.Unstructured, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	var objs []*unstructured.Unstructured
	paths := manifests
	if opts.RayAPI.enabled() {
		paths = append(slices.Clone(manifests), rayAPIManifest)
	}
	for _, path := range paths {
		docs, err := renderTemplate(path, opts)
		if err != nil {
			return nil, err
		}
		if path == roleManifest && opts.WatchNamespace != "" && len(docs) == 1 {
			docs = splitRole(docs[0], opts)
		}
		objs = append(objs, docs...)
	}
	for _, obj := range objs {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelName] = "trainyard"
		labels[LabelManagedBy] = ManagedBy
		obj.SetLabels(labels)
	}
	return objs, nil
}

// renderTemplate renders the embedded template at path with the (defaulted) options.
func renderTemplate(path string, opts Options) ([]*unstructured.Unstructured, error) {
	text, err := config.FS.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read embedded %s: %w", path, err)
	}
	funcs := template.FuncMap{"quote": strconv.Quote}
	tmpl, err := template.New(path).Funcs(funcs).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("parse embedded %s: %w", path, err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, templateData{Options: opts, Name: Name}); err != nil {
		return nil, fmt.Errorf("render %s: %w", path, err)
	}
	docs, err := decodeObjects(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", path, err)
	}
	return docs, nil
}

// RenderYAML returns the objects of Render as one YAML stream.
func RenderYAML(opts Options) ([]byte, error) {
	objs, err := Render(opts)
	if err != nil {
		return nil, err
	}
	return MarshalYAML(objs)
}

// MarshalYAML writes objects as a YAML stream, each document starting with "---".
func MarshalYAML(objs []*unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("write %s as YAML: %w", Ref(obj), err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// decodeObjects reads the objects of a YAML stream, skipping empty documents.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := string(bytes.TrimSpace(data)); s == "null" || s == "{}" {
			continue // an empty document, or comments only
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("a document lacks apiVersion, kind or metadata.name")
		}
		objs = append(objs, obj)
	}
}

// Ref names an object the way kubectl prints it: "deployment.apps/trainyard-operator".
func Ref(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + obj.GetName()
}
