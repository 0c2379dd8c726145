package podpolicy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// DefaultCapabilities are the capabilities a container may add back after dropping them
// (the workers drop ALL): the container runtime's defaults, as Pod Security Standards'
// baseline level lists them. Anything else (SYS_ADMIN, NET_ADMIN, IPC_LOCK, ...) is refused.
var DefaultCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// The lists of a pod spec whose items a location names.
const (
	listContainers     = "containers"
	listInitContainers = "initContainers"
	listVolumes        = "volumes"
)

// location is where in a pod spec a finding is: a field of the pod spec (list empty),
// or a field of the item of a list with that name; in a container, maybe a field of an
// item of its env or ports, which the merge matches by name and port (key), so that its
// index in the pod is not the one in the user's template.
type location struct {
	list string
	name string
	path string // from the item, or from the pod spec: "securityContext.privileged"

	sub   string // "env" or "ports": path is then from the sub-item
	key   string // the sub-item's name or port
	index int    // the sub-item's index in the pod
}

// podPath is the location as a path in the pod: spec.containers[0].securityContext.privileged.
func (l location) podPath(pod *corev1.PodSpec) string {
	if l.list == "" {
		return "spec." + l.path
	}
	return fmt.Sprintf("spec.%s[%d].%s", l.list, itemIndex(pod, l.list, l.name), l.itemPath(l.index))
}

// itemPath is the path from the list's item, the sub-item at index i.
func (l location) itemPath(i int) string {
	if l.sub == "" {
		return l.path
	}
	return fmt.Sprintf("%s[%d].%s", l.sub, i, l.path)
}

// subIndex is the index of the location's sub-item in container c of pod, or -1.
func (l location) subIndex(pod *corev1.PodSpec) int {
	i := itemIndex(pod, l.list, l.name)
	if i < 0 || l.list == listVolumes {
		return -1
	}
	c := pod.Containers
	if l.list == listInitContainers {
		c = pod.InitContainers
	}
	switch l.sub {
	case "env":
		return slices.IndexFunc(c[i].Env, func(e corev1.EnvVar) bool { return e.Name == l.key })
	case "ports":
		return slices.IndexFunc(c[i].Ports, func(p corev1.ContainerPort) bool { return fmt.Sprint(p.ContainerPort) == l.key })
	}
	return -1
}

// itemIndex is the index of the item named name in the pod's list, or -1.
func itemIndex(pod *corev1.PodSpec, list, name string) int {
	if pod == nil {
		return -1
	}
	switch list {
	case listContainers:
		return slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	case listInitContainers:
		return slices.IndexFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == name })
	case listVolumes:
		return slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	}
	return -1
}

// finding is one thing of a pod that the policy refuses, unless it is a Secret or a
// service account that Access allows.
type finding struct {
	at             location
	detail         string
	secret         string
	serviceAccount string
}

func (f finding) allowed(a *Access) bool {
	switch {
	case f.secret != "":
		return a == nil || slices.Contains(a.Secrets, f.secret)
	case f.serviceAccount != "":
		return a == nil || slices.Contains(a.ServiceAccounts, f.serviceAccount)
	}
	return false
}

// Details of the findings.
const (
	hostNamespace = "host namespaces are refused"
	unconfined    = "an Unconfined profile is refused (the default is RuntimeDefault)"
)

var (
	label        = v1.LabelTrainJobAccess + "=true"
	secretDetail = "Secret %q is refused: the pods read only Secrets labelled " + label +
		", or those trainyard submit --kube made for the TrainJob (and it owns)"
	serviceAccountDetail = "service account %q is refused: workers run as the namespace's default service account, " +
		"or one labelled " + label
)

// findings lists what the restricted policy refuses in pod, in the order of its fields.
func findings(pod *corev1.PodSpec) []finding {
	var out []finding
	add := func(list, name, path, detail string) {
		out = append(out, finding{at: location{list: list, name: name, path: path}, detail: detail})
	}
	for _, ns := range []struct {
		on    bool
		field string
	}{{pod.HostNetwork, "hostNetwork"}, {pod.HostPID, "hostPID"}, {pod.HostIPC, "hostIPC"}} {
		if ns.on {
			add("", "", ns.field, hostNamespace)
		}
	}
	if sc := pod.SecurityContext; sc != nil {
		profiles(sc.SeccompProfile, sc.AppArmorProfile, sc.WindowsOptions, func(path, detail string) {
			add("", "", "securityContext."+path, detail)
		})
	}
	for _, sa := range []struct{ name, field string }{
		{pod.ServiceAccountName, "serviceAccountName"}, {pod.DeprecatedServiceAccount, "serviceAccount"}} {
		if sa.name != "" && sa.name != DefaultServiceAccount {
			out = append(out, finding{at: location{path: sa.field}, serviceAccount: sa.name,
				detail: fmt.Sprintf(serviceAccountDetail, sa.name)})
		}
	}
	for _, l := range []struct {
		list string
		cs   []corev1.Container
	}{{listInitContainers, pod.InitContainers}, {listContainers, pod.Containers}} {
		for _, c := range l.cs {
			out = append(out, containerFindings(l.list, &c)...)
		}
	}
	for _, v := range pod.Volumes {
		out = append(out, volumeFindings(&v)...)
	}
	return out
}

// profiles reports Unconfined seccomp and AppArmor profiles and Windows host processes.
func profiles(seccomp *corev1.SeccompProfile, apparmor *corev1.AppArmorProfile, windows *corev1.WindowsSecurityContextOptions,
	add func(path, detail string)) {
	if seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeUnconfined {
		add("seccompProfile.type", "a seccomp profile "+unconfined)
	}
	if apparmor != nil && apparmor.Type == corev1.AppArmorProfileTypeUnconfined {
		add("appArmorProfile.type", "an AppArmor profile "+unconfined[3:])
	}
	if windows != nil && windows.HostProcess != nil && *windows.HostProcess {
		add("windowsOptions.hostProcess", hostNamespace)
	}
}

// containerFindings lists what the policy refuses of one container.
func containerFindings(list string, c *corev1.Container) []finding {
	var out []finding
	add := func(path, detail string) {
		out = append(out, finding{at: location{list: list, name: c.Name, path: path}, detail: detail})
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.Privileged != nil && *sc.Privileged {
			add("securityContext.privileged", "privileged containers are refused")
		}
		if sc.Capabilities != nil {
			for i, capability := range sc.Capabilities.Add {
				name := strings.TrimPrefix(strings.ToUpper(string(capability)), "CAP_")
				if !slices.Contains(DefaultCapabilities, name) {
					add(fmt.Sprintf("securityContext.capabilities.add[%d]", i), fmt.Sprintf("adding capability %s is refused "+
						"(only the container runtime's defaults may be added back: %s)", capability, strings.Join(DefaultCapabilities, ", ")))
				}
			}
		}
		if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			add("securityContext.procMount", "an unmasked /proc is refused")
		}
		profiles(sc.SeccompProfile, sc.AppArmorProfile, sc.WindowsOptions, func(path, detail string) {
			add("securityContext."+path, detail)
		})
	}
	for i, p := range c.Ports {
		if p.HostPort != 0 {
			out = append(out, finding{at: location{list: list, name: c.Name, sub: "ports", key: fmt.Sprint(p.ContainerPort), index: i,
				path: "hostPort"}, detail: "host ports are refused"})
		}
	}
	secret := func(path, name string) {
		out = append(out, finding{at: location{list: list, name: c.Name, path: path}, secret: name,
			detail: fmt.Sprintf(secretDetail, name)})
	}
	for i, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			name := e.ValueFrom.SecretKeyRef.Name
			out = append(out, finding{at: location{list: list, name: c.Name, sub: "env", key: e.Name, index: i,
				path: "valueFrom.secretKeyRef.name"}, secret: name, detail: fmt.Sprintf(secretDetail, name)})
		}
	}
	for i, e := range c.EnvFrom {
		if e.SecretRef != nil {
			secret(fmt.Sprintf("envFrom[%d].secretRef.name", i), e.SecretRef.Name)
		}
	}
	return out
}

// volumeFindings lists what the policy refuses of one volume: a host folder, Secrets
// the pod may not read.
func volumeFindings(v *corev1.Volume) []finding {
	var out []finding
	at := func(path string) location { return location{list: listVolumes, name: v.Name, path: path} }
	if v.HostPath != nil {
		out = append(out, finding{at: at("hostPath"), detail: "hostPath volumes are refused: mount a PersistentVolumeClaim " +
			"(an administrator may bind one to a host folder with a hostPath PersistentVolume)"})
	}
	secret := func(path, name string) {
		out = append(out, finding{at: at(path), secret: name, detail: fmt.Sprintf(secretDetail, name)})
	}
	if v.Secret != nil {
		secret("secret.secretName", v.Secret.SecretName)
	}
	if v.Projected != nil {
		for i, s := range v.Projected.Sources {
			if s.Secret != nil {
				secret(fmt.Sprintf("projected.sources[%d].secret.name", i), s.Secret.Name)
			}
		}
	}
	return out
}
