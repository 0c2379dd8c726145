// Package helmtest tests the Helm chart (charts/trainyard) with Helm's own Go packages:
// it renders the chart as `helm template` does, checks that with default values it makes
// the same operator as `trainyard install`, and installs and uninstalls it on a real
// kube-apiserver (internal/testkube) as `helm install` does.
//
// It is a module of its own so that Helm and its dependencies stay out of the main
// module's: `make test` runs it with `cd test/helm && go test ./...`.
package helmtest
