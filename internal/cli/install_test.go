package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unreachableKubeconfig writes a kubeconfig whose one cluster listens nowhere.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
current-context: gone
clusters:
- name: gone
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: me
  user: {token: secret}
contexts:
- name: gone
  context: {cluster: gone, user: me}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad input to install, uninstall and operator: exit 2 and a message that names the flag,
// before any cluster is asked anything; a cluster that is not there: exit 1.
func TestInstallErrors(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // hide ~/.kube/config
	t.Setenv("KUBERNETES_SERVICE_HOST", "")                    // and a pod's service account
	cases := map[string]struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		"namespace": {[]string{"install", "--dry-run", "-n", "Trainyard_System"}, 2,
			`--namespace: "Trainyard_System" is not a valid namespace name`},
		"image": {[]string{"install", "--dry-run", "--image", "ghcr.io/Trainyard/trainyard:v1"}, 2,
			`--image: "ghcr.io/Trainyard/trainyard:v1" is not an image reference`},
		"image and namespace": {[]string{"install", "--kubeconfig", kubeconfig, "--image", "a b", "-n", "-x"}, 2,
			"--namespace: \"-x\" is not a valid namespace name"},
		"replicas": {[]string{"install", "--dry-run", "--replicas", "0"}, 2, "--replicas 0: must be at least 1"},
		"pull policy": {[]string{"install", "--dry-run", "--image-pull-policy", "always"}, 2,
			`--image-pull-policy: "always": must be Always, IfNotPresent or Never`},
		"uninstall namespace":       {[]string{"uninstall", "-n", "UPPER"}, 2, `--namespace: "UPPER" is not a valid namespace name`},
		"operator image":            {[]string{"operator", "--image", "UPPER"}, 2, `--image: "UPPER" is not an image reference`},
		"operator namespace":        {[]string{"operator", "--namespace", "a.b"}, 2, `--namespace: "a.b" is not a valid namespace name`},
		"operator room probe image": {[]string{"operator", "--room-probe-image", "UPPER"}, 2, `--room-probe-image: "UPPER" is not an image reference`},
		"operator room probe class": {[]string{"operator", "--room-probe-priority-class", "Bad_Name"}, 2,
			`--room-probe-priority-class "Bad_Name": not a PriorityClass name: a lowercase RFC 1123 subdomain`},
		"operator elastic settle": {[]string{"operator", "--elastic-settle", "-5s"}, 2,
			"--elastic-settle -5s: give a duration of 0 or more, such as 30s (0: the default, 30s)"},
		"operator CPU per GPU": {[]string{"operator", "--worker-cpu-per-gpu", "-1"}, 2,
			`--worker-cpu-per-gpu: "-1": must not be negative ("0" for none)`},
		"operator memory per GPU": {[]string{"operator", "--worker-memory-per-gpu", "16GB"}, 2,
			`--worker-memory-per-gpu: "16GB" is not an amount such as 8Gi or 512Mi`},
		"install CPU per GPU": {[]string{"install", "--dry-run", "--worker-cpu-per-gpu", "two"}, 2,
			`--worker-cpu-per-gpu: "two" is not an amount such as 2 or 500m`},
		"install memory per GPU": {[]string{"install", "--dry-run", "--worker-memory-per-gpu", "0.5"}, 2,
			`--worker-memory-per-gpu: "0.5": memory is a whole number of bytes`},
		"no kubeconfig file": {[]string{"install", "--kubeconfig", "/nonexistent/kubeconfig"}, 2,
			"--kubeconfig: stat /nonexistent/kubeconfig: no such file or directory"},
		"no such context": {[]string{"uninstall", "--kubeconfig", kubeconfig, "--context", "prod"}, 2,
			`--context "prod": no such context in the kubeconfig (it has: gone)`},
		"no cluster configured": {[]string{"install"}, 2, "no Kubernetes cluster configured"},
		"unreachable install": {[]string{"install", "--kubeconfig", kubeconfig}, 1,
			`cannot reach the Kubernetes API server of context "gone" (https://127.0.0.1:1)`},
		"unreachable uninstall": {[]string{"uninstall", "--kubeconfig", kubeconfig}, 1,
			`cannot reach the Kubernetes API server of context "gone" (https://127.0.0.1:1)`},
		"install arguments": {[]string{"install", "extra"}, 2, `unknown command "extra" for "trainyard install"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := trainyard(tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("trainyard %s: exit %d, stderr:\n%s\nwant exit %d and %q", strings.Join(tc.args, " "), code, errOut, tc.wantCode, tc.wantErr)
			}
			if out != "" {
				t.Errorf("stdout: %q, want nothing", out)
			}
		})
	}
}

func TestInstallDryRun(t *testing.T) {
	code, out, errOut := trainyard("install", "--dry-run", "-n", "ml", "--image", "registry.local/trainyard:v9", "--replicas", "3")
	if code != 0 || errOut != "" {
		t.Fatalf("install --dry-run: exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{
		"kind: Namespace\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: trainyard\n    app.kubernetes.io/name: trainyard\n  name: ml\n",
		"kind: CustomResourceDefinition", "kind: ClusterRole\n", "kind: ServiceAccount", "kind: ClusterRoleBinding",
		"  replicas: 3\n", "image: registry.local/trainyard:v9\n", "- --image\n        - registry.local/trainyard:v9\n",
		"- --worker-cpu-per-gpu\n        - \"2\"\n        - --worker-memory-per-gpu\n        - 8Gi\n",
		"kind: PriorityClass\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: trainyard\n    app.kubernetes.io/name: trainyard\n  name: trainyard-operator-room-probe\npreemptionPolicy: Never\n",
		"- --room-probe-priority-class\n        - trainyard-operator-room-probe\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("install --dry-run lacks %q", want)
		}
	}
	if n := strings.Count(out, "---\n"); n != 8 {
		t.Errorf("install --dry-run printed %d documents, want 8 (with the metrics reader's ClusterRole and the room probes' PriorityClass)", n)
	}
	code, out, errOut = trainyard("install", "--dry-run", "-n", "ml", "--image", "registry.local/trainyard:v9", "--watch-namespace", "team-a", "--pod-policy", "off",
		"--api-server-cidr", "10.0.0.1/32", "--worker-cpu-per-gpu", "100m", "--worker-memory-per-gpu", "0")
	if code != 0 || errOut != "" {
		t.Fatalf("install --dry-run --watch-namespace: exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"kind: Role\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: trainyard\n    app.kubernetes.io/name: trainyard\n  name: trainyard-operator\n  namespace: team-a\n",
		"kind: RoleBinding", "name: trainyard-operator-leader-election\n  namespace: ml\n",
		"- --pod-policy\n        - \"off\"\n        - --namespace\n        - team-a\n        - --api-server-cidr\n        - 10.0.0.1/32\n",
		"- --worker-cpu-per-gpu\n        - 100m\n        - --worker-memory-per-gpu\n        - \"0\"\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("install --dry-run --watch-namespace lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{{"--pod-policy", "baseline"}, {"--watch-namespace", "Team_A"}, {"--api-server-cidr", "10.0.0.1"}} {
		if code, _, errOut := trainyard(append([]string{"install", "--dry-run"}, bad...)...); code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("install %s: exit %d, %s; want 2 naming the flag", bad, code, errOut)
		}
	}
}
