package kubeconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// twoClusters is a kubeconfig with two contexts; "dev" is current and has a namespace.
const twoClusters = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster: {server: "https://dev.example.com:6443"}
- name: prod
  cluster: {server: "https://prod.example.com:6443"}
users:
- name: me
  user: {token: secret}
contexts:
- name: dev
  context: {cluster: dev, user: me, namespace: team-a}
- name: prod
  context: {cluster: prod, user: me}
`

// isolate writes twoClusters to a file and returns its path, and points the default
// loading ($KUBECONFIG, which hides ~/.kube/config) at a file that does not exist.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(twoClusters), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFlags(t *testing.T) {
	cases := map[string]struct {
		args     []string
		env      bool // set $KUBECONFIG to the file instead of passing --kubeconfig
		wantHost string
		wantNS   string
	}{
		"current context":           {args: []string{}, wantHost: "https://dev.example.com:6443", wantNS: "team-a"},
		"from $KUBECONFIG":          {args: []string{}, env: true, wantHost: "https://dev.example.com:6443", wantNS: "team-a"},
		"--context":                 {args: []string{"--context", "prod"}, wantHost: "https://prod.example.com:6443", wantNS: "default"},
		"-n":                        {args: []string{"-n", "team-b"}, wantHost: "https://dev.example.com:6443", wantNS: "team-b"},
		"--context and --namespace": {args: []string{"--context=prod", "--namespace=x"}, wantHost: "https://prod.example.com:6443", wantNS: "x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := isolate(t)
			args := tc.args
			if tc.env {
				t.Setenv("KUBECONFIG", path)
			} else {
				args = append([]string{"--kubeconfig", path}, args...)
			}
			var f Flags
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			f.Bind(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.RESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost || cfg.BearerToken != "secret" {
				t.Errorf("host %q, token %q; want %q, secret", cfg.Host, cfg.BearerToken, tc.wantHost)
			}
			ns, err := f.ResolvedNamespace()
			if err != nil || ns != tc.wantNS {
				t.Errorf("namespace %q, %v; want %q", ns, err, tc.wantNS)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	path := isolate(t)
	f := Flags{Kubeconfig: path, Context: "prod"}
	cfg, err := f.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Describe(cfg); got != `context "prod" (https://prod.example.com:6443)` {
		t.Errorf("Describe: %s", got)
	}
	if got := (&Flags{Kubeconfig: path}).Describe(cfg); got != `context "dev" (https://prod.example.com:6443)` {
		t.Errorf("Describe of the current context: %s", got)
	}
}

func TestBindConnection(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	new(Flags).BindConnection(fs)
	if fs.Lookup("kubeconfig") == nil || fs.Lookup("context") == nil {
		t.Error("BindConnection lacks --kubeconfig or --context")
	}
	if fs.Lookup("namespace") != nil || fs.ShorthandLookup("n") != nil {
		t.Error("BindConnection binds a namespace flag")
	}
}

func TestErrors(t *testing.T) {
	cases := map[string]struct {
		flags func(path string) Flags
		want  string
	}{
		"missing file":       {func(string) Flags { return Flags{Kubeconfig: "/nonexistent/kubeconfig"} }, "--kubeconfig: stat /nonexistent/kubeconfig: no such file or directory"},
		"no such context":    {func(p string) Flags { return Flags{Kubeconfig: p, Context: "staging"} }, `--context "staging": no such context in the kubeconfig (it has: dev, prod)`},
		"nothing configured": {func(string) Flags { return Flags{} }, "no Kubernetes cluster configured: pass --kubeconfig, set $KUBECONFIG"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := isolate(t)
			f := tc.flags(path)
			_, err := f.RESTConfig()
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RESTConfig: %v, want a *ConfigError with %q", err, tc.want)
			}
		})
	}
}
