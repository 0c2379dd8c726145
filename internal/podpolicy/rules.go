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

// SafeSysctls are the sysctls a pod may set: those Pod Security Standards call safe
// (namespaced, and isolated from the node's other pods). Any other is refused.
var SafeSysctls = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem"}

// SELinuxTypes are the SELinux types a pod or a container may ask for (Pod Security
// Standards' baseline list); none at all leaves it to the container runtime.
var SELinuxTypes = []string{"container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

// The lists of a pod whose items a location names.
const (
	listContainers       = "containers"
	listInitContainers   = "initContainers"
	listVolumes          = "volumes"
	listImagePullSecrets = "imagePullSecrets" // named by the Secret
	listAnnotations      = "annotations"      // metadata.annotations, named by the key
)

// location is where in a pod a finding is: a field of the pod spec (list empty), or a
// field of the item of a list with that name; in a container, maybe a field of an item
// of its env or ports, which the merge matches by name and port (key), so that its index
// in the pod is not the one in the user's template.
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
	switch l.list {
	case "":
		return "spec." + l.path
	case listAnnotations:
		return "metadata.annotations[" + l.name + "]"
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
	if i < 0 || l.list != listContainers && l.list != listInitContainers {
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
	case listImagePullSecrets:
		return slices.IndexFunc(pod.ImagePullSecrets, func(r corev1.LocalObjectReference) bool { return r.Name == name })
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

// findings lists what the restricted policy refuses in a pod with these annotations and
// spec, in the order of its fields.
func findings(annotations map[string]string, pod *corev1.PodSpec) []finding {
	out := annotationFindings(annotations)
	out = append(out, podFindings(pod)...)
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

// podFindings lists what the policy refuses of the pod spec's own fields.
func podFindings(pod *corev1.PodSpec) []finding {
	var out []finding
	add := func(path, detail string) { out = append(out, finding{at: location{path: path}, detail: detail}) }
	if pod.NodeName != "" {
		add("nodeName", "binding the pod to a node is refused: it bypasses the scheduler and its checks (taints, resources, quotas); "+
			"choose nodes with nodeSelector or affinity")
	}
	for _, ns := range []struct {
		on    bool
		field string
	}{{pod.HostNetwork, "hostNetwork"}, {pod.HostPID, "hostPID"}, {pod.HostIPC, "hostIPC"}} {
		if ns.on {
			add(ns.field, hostNamespace)
		}
	}
	if sc := pod.SecurityContext; sc != nil {
		contextFindings(sc.SeccompProfile, sc.AppArmorProfile, sc.SELinuxOptions, sc.WindowsOptions, func(path, detail string) {
			add("securityContext."+path, detail)
		})
		for i, s := range sc.Sysctls {
			// The kubelet takes net/ipv4/tcp_syncookies for net.ipv4.tcp_syncookies.
			if !slices.Contains(SafeSysctls, strings.ReplaceAll(s.Name, "/", ".")) {
				add(fmt.Sprintf("securityContext.sysctls[%d].name", i), fmt.Sprintf("sysctl %s is refused: "+
					"a pod may set only the safe ones (namespaced, and isolated from other pods): %s", s.Name, strings.Join(SafeSysctls, ", ")))
			}
		}
	}
	if !hasSeccomp(pod) {
		add("securityContext.seccompProfile", "a seccomp profile is required (RuntimeDefault, as Trainyard sets, or Localhost): "+
			"without one most nodes run the containers Unconfined")
	}
	if pod.RuntimeClassName != nil {
		add("runtimeClassName", "choosing a RuntimeClass is refused: a runtime handler may run containers with less isolation "+
			"than the node's default; an administrator makes the runtime the workers need (nvidia, ...) the nodes' default")
	}
	if len(pod.EphemeralContainers) > 0 {
		add("ephemeralContainers", "ephemeral containers are refused in a pod template (kubectl debug adds them to running pods)")
	}
	for _, sa := range []struct{ name, field string }{
		{pod.ServiceAccountName, "serviceAccountName"}, {pod.DeprecatedServiceAccount, "serviceAccount"}} {
		if sa.name != "" && sa.name != DefaultServiceAccount {
			out = append(out, finding{at: location{path: sa.field}, serviceAccount: sa.name,
				detail: fmt.Sprintf(serviceAccountDetail, sa.name)})
		}
	}
	for _, r := range pod.ImagePullSecrets {
		if r.Name != "" {
			out = append(out, finding{at: location{list: listImagePullSecrets, name: r.Name, path: "name"}, secret: r.Name,
				detail: fmt.Sprintf(secretDetail, r.Name)})
		}
	}
	return out
}

// hasSeccomp reports whether every container of pod runs under a seccomp profile, its
// own or the pod's (an Unconfined one is refused apart).
func hasSeccomp(pod *corev1.PodSpec) bool {
	set := func(p *corev1.SeccompProfile) bool { return p != nil && p.Type != "" }
	if sc := pod.SecurityContext; sc != nil && set(sc.SeccompProfile) {
		return true
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		if c.SecurityContext == nil || !set(c.SecurityContext.SeccompProfile) {
			return false
		}
	}
	return true
}

// contextFindings reports what the policy refuses in the fields a pod's and a container's
// securityContext share: Unconfined seccomp and AppArmor profiles, SELinux options
// beyond the container types, Windows host processes.
func contextFindings(seccomp *corev1.SeccompProfile, apparmor *corev1.AppArmorProfile, selinux *corev1.SELinuxOptions,
	windows *corev1.WindowsSecurityContextOptions, add func(path, detail string)) {
	if seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeUnconfined {
		add("seccompProfile.type", "a seccomp profile "+unconfined)
	}
	if apparmor != nil && apparmor.Type == corev1.AppArmorProfileTypeUnconfined {
		add("appArmorProfile.type", "an AppArmor profile "+unconfined[3:])
	}
	if selinux != nil {
		if selinux.Type != "" && !slices.Contains(SELinuxTypes, selinux.Type) {
			add("seLinuxOptions.type", fmt.Sprintf("SELinux type %s is refused (spc_t and the like are unconfined): "+
				"use %s, or none for the runtime's default", selinux.Type, strings.Join(SELinuxTypes, ", ")))
		}
		for _, f := range []struct{ field, value string }{{"user", selinux.User}, {"role", selinux.Role}} {
			if f.value != "" {
				add("seLinuxOptions."+f.field, "a custom SELinux "+f.field+" is refused: leave it to the container runtime")
			}
		}
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
		securityFindings(sc, add)
	}
	for i, p := range c.Ports {
		if p.HostPort != 0 {
			out = append(out, finding{at: location{list: list, name: c.Name, sub: "ports", key: fmt.Sprint(p.ContainerPort), index: i,
				path: "hostPort"}, detail: "host ports are refused"})
		}
	}
	handlerHosts(c, add)
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

// securityFindings reports what the policy refuses in a container's securityContext.
func securityFindings(sc *corev1.SecurityContext, add func(path, detail string)) {
	if sc.Privileged != nil && *sc.Privileged {
		add("securityContext.privileged", "privileged containers are refused")
	}
	if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
		add("securityContext.allowPrivilegeEscalation", "privilege escalation (setuid binaries, file capabilities) is refused: "+
			"set allowPrivilegeEscalation false, as Trainyard does, or leave it out")
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
	contextFindings(sc.SeccompProfile, sc.AppArmorProfile, sc.SELinuxOptions, sc.WindowsOptions, func(path, detail string) {
		add("securityContext."+path, detail)
	})
}

// handlerHosts reports probes and lifecycle handlers that name a host: the kubelet
// would connect to it from the node.
func handlerHosts(c *corev1.Container, add func(path, detail string)) {
	const detail = "a probe or lifecycle handler's host is refused: the kubelet would connect to it from the node; " +
		"leave it unset (the pod's own address)"
	check := func(path string, http *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction) {
		if http != nil && http.Host != "" {
			add(path+".httpGet.host", detail)
		}
		if tcp != nil && tcp.Host != "" {
			add(path+".tcpSocket.host", detail)
		}
	}
	for _, p := range []struct {
		path  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		if p.probe != nil {
			check(p.path, p.probe.HTTPGet, p.probe.TCPSocket)
		}
	}
	if c.Lifecycle != nil {
		for _, h := range []struct {
			path    string
			handler *corev1.LifecycleHandler
		}{{"lifecycle.postStart", c.Lifecycle.PostStart}, {"lifecycle.preStop", c.Lifecycle.PreStop}} {
			if h.handler != nil {
				check(h.path, h.handler.HTTPGet, h.handler.TCPSocket)
			}
		}
	}
}
