// Package kubeconfig finds the Kubernetes cluster a command talks to, the way kubectl
// does: --kubeconfig, else $KUBECONFIG (a list of files, merged), else ~/.kube/config,
// else the in-cluster service account; --context picks a context and -n/--namespace
// overrides its namespace. Every trainyard command that talks to Kubernetes binds its
// flags with Flags.Bind (or BindConnection when its --namespace means something else).
package kubeconfig
