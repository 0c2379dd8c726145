package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/kubeconfig"
)

// This file holds what the commands that can work on a Kubernetes cluster instead of a
// trainyard server (--kube) share: the flags that find the cluster, the check that a
// command's flags fit the mode it runs in, and the exit codes of kubecli's errors. The
// commands' --kube halves are in kube_*.go; the work is in internal/kubecli.

// kubeHelp ends the Long help of every command that takes --kube.
const kubeHelp = `

With --kube the command works on the TrainJobs of a Kubernetes cluster instead, which
Trainyard's operator runs ('trainyard install' puts it there): the cluster of
--kubeconfig (default $KUBECONFIG, else ~/.kube/config, else the pod's service account)
and --context, in namespace -n (default: the context's namespace, else "default").`

// serverFlags find a trainyard server; --kube refuses them.
var serverFlags = []string{"address", "token-file", "ca-cert"}

// kubeOptions are the flags with which a command works on a cluster: --kube, and
// --kubeconfig, --context and -n, which need it.
type kubeOptions struct {
	on    bool
	flags kubeconfig.Flags

	fs         *pflag.FlagSet
	kubeOnly   []string // flags that need --kube
	serverOnly []string // flags that --kube refuses
}

// bind registers --kube, --kubeconfig, --context and -n/--namespace on fs.
func (k *kubeOptions) bind(fs *pflag.FlagSet) {
	k.fs = fs
	fs.BoolVar(&k.on, "kube", false, "work on the TrainJobs of a Kubernetes cluster instead of a trainyard server")
	k.flags.Bind(fs)
	k.kubeOnly = append(k.kubeOnly, "kubeconfig", "context", "namespace")
	k.serverOnly = append(k.serverOnly, serverFlags...)
}

// only marks flags of the command that mean something only with --kube.
func (k *kubeOptions) only(names ...string) { k.kubeOnly = append(k.kubeOnly, names...) }

// notWith marks flags of the command that mean something only for a trainyard server.
func (k *kubeOptions) notWith(names ...string) { k.serverOnly = append(k.serverOnly, names...) }

// enabled reports whether the command works on a cluster, and refuses flags of the
// other mode: a cluster's without --kube, a server's with it.
func (k *kubeOptions) enabled() (bool, error) {
	given := func(names []string) []string {
		var out []string
		for _, n := range names {
			if k.fs.Changed(n) {
				out = append(out, "--"+n)
			}
		}
		return out
	}
	if k.on {
		if bad := given(k.serverOnly); len(bad) > 0 {
			return false, usageError(fmt.Errorf("%s: only for a trainyard server, not with --kube", strings.Join(bad, ", ")))
		}
		return true, nil
	}
	if bad := given(k.kubeOnly); len(bad) > 0 {
		return false, usageError(fmt.Errorf("%s: only with --kube (a Kubernetes cluster); add --kube", strings.Join(bad, ", ")))
	}
	return false, nil
}

// connect returns a connection to the cluster the flags name.
func (k *kubeOptions) connect(g *globals) (*kubecli.Cluster, error) {
	c, err := kubecli.Connect(&k.flags, "trainyard/"+Version, g.io.Err)
	if err != nil {
		return nil, kubeError(err)
	}
	return c, nil
}

// kubeError gives kubecli's errors their exit codes: 2 for bad input (nothing was done,
// or the cluster refused it as invalid), 1 for the rest.
func kubeError(err error) error {
	var ie *kubecli.InputError
	if errors.As(err, &ie) {
		return usageError(err)
	}
	return failed(err)
}

// where names the namespaces a command looked in, for "No TrainJobs ...".
func where(c *kubecli.Cluster, allNamespaces bool) string {
	if allNamespaces {
		return "in any namespace"
	}
	return fmt.Sprintf("in namespace %s", c.Namespace)
}

// nsFlag is the -n flag that hints repeat: given when the user gave it, or when the
// job is elsewhere than the context's namespace.
func nsFlag(c *kubecli.Cluster, ns string) string {
	if c.NamespaceGiven || ns != c.Namespace {
		return " -n " + ns
	}
	return ""
}
