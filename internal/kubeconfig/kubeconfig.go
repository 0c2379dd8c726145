package kubeconfig

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Flags are the command-line flags that find a cluster. The zero value loads the default
// kubeconfig ($KUBECONFIG, else ~/.kube/config, else in-cluster) and its current context.
type Flags struct {
	// Kubeconfig is a kubeconfig file; empty means $KUBECONFIG, else ~/.kube/config.
	Kubeconfig string
	// Context names the context to use; empty means the current context.
	Context string
	// Namespace overrides the context's namespace; empty keeps it.
	Namespace string
}

// Bind registers --kubeconfig, --context and -n/--namespace on fs.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	f.BindConnection(fs)
	fs.StringVarP(&f.Namespace, "namespace", "n", "", "the namespace (default: the context's namespace, else \"default\")")
}

// BindConnection registers --kubeconfig and --context only, for commands whose
// --namespace means something else.
func (f *Flags) BindConnection(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context to use (default: the current context)")
}

// clientConfig is the kubeconfig the flags name, loaded lazily.
func (f *Flags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	overrides.Context.Namespace = f.Namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// RESTConfig returns the client configuration of the cluster the flags name. It reads
// files but does not contact the cluster. Its errors are *ConfigError: the flags or the
// files they name are wrong, which is the user's to fix.
func (f *Flags) RESTConfig() (*rest.Config, error) {
	if f.Kubeconfig != "" {
		if _, err := os.Stat(f.Kubeconfig); err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("--kubeconfig: %w", err)}
		}
	}
	cc := f.clientConfig()
	if f.Context != "" {
		raw, err := cc.RawConfig()
		if err != nil {
			return nil, f.configError(err)
		}
		if _, ok := raw.Contexts[f.Context]; !ok {
			names := slices.Sorted(maps.Keys(raw.Contexts))
			return nil, &ConfigError{Err: fmt.Errorf("--context %q: no such context in the kubeconfig (it has: %s)",
				f.Context, strings.Join(names, ", "))}
		}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, f.configError(err)
	}
	return cfg, nil
}

// ResolvedNamespace returns --namespace, else the context's namespace, else the pod's
// namespace in a cluster, else "default".
func (f *Flags) ResolvedNamespace() (string, error) {
	if f.Namespace != "" {
		return f.Namespace, nil
	}
	ns, _, err := f.clientConfig().Namespace()
	if err != nil {
		return "", f.configError(err)
	}
	if ns == "" {
		ns = "default"
	}
	return ns, nil
}

// Describe names the cluster for messages: the context and the server's address, e.g.
// `context "kind-dev" (https://127.0.0.1:6443)`.
func (f *Flags) Describe(cfg *rest.Config) string {
	name := f.Context
	if name == "" {
		if raw, err := f.clientConfig().RawConfig(); err == nil {
			name = raw.CurrentContext
		}
	}
	if name == "" {
		return cfg.Host
	}
	return fmt.Sprintf("context %q (%s)", name, cfg.Host)
}

// configError turns clientcmd's errors into ones that say which flag or file to fix.
func (f *Flags) configError(err error) error {
	switch {
	case clientcmd.IsEmptyConfig(err):
		return &ConfigError{Err: errors.New("no Kubernetes cluster configured: pass --kubeconfig, set $KUBECONFIG, " +
			"or write ~/.kube/config (and not running in a pod)")}
	}
	return &ConfigError{Err: fmt.Errorf("load kubeconfig: %w", err)}
}

// ConfigError is an error in the flags or the kubeconfig files: nothing was asked of a
// cluster. Commands exit 2 on it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
