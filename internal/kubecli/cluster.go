package kubecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trainyard/trainyard/internal/kubeconfig"
)

// dialTimeout bounds connecting to the API server, so that a cluster that is not there
// is reported in seconds, not after the system's TCP timeout.
const dialTimeout = 10 * time.Second

// InputError is bad input: the command asked nothing of the cluster, or the cluster
// refused what it was sent as invalid. trainyard exits 2 for it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputError(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// Cluster is a connection to a cluster's API server, working in one namespace.
type Cluster struct {
	// Core reaches pods, nodes and events.
	Core kubernetes.Interface
	// Jobs reaches TrainJobs.
	Jobs *TrainJobs
	// Namespace is the namespace commands work in.
	Namespace string
	// NamespaceGiven says that -n named the namespace (hints then repeat it).
	NamespaceGiven bool
	// Host names the cluster for messages: the context and the API server's address.
	Host string
}

// Connect loads the kubeconfig the flags name and returns a connection to its cluster,
// in -n's namespace, else the context's, else "default". Nothing is asked of the API
// server yet; a missing or broken kubeconfig is an *InputError. API warnings are written
// to warnings.
func Connect(flags *kubeconfig.Flags, userAgent string, warnings io.Writer) (*Cluster, error) {
	cfg, err := flags.RESTConfig()
	if err != nil {
		return nil, &InputError{Err: err}
	}
	ns, err := flags.ResolvedNamespace()
	if err != nil {
		return nil, &InputError{Err: err}
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return nil, inputError("namespace %q: %s", ns, strings.Join(msgs, "; "))
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	cfg.Dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	if warnings != nil {
		cfg.WarningHandler = rest.NewWarningWriter(warnings, rest.WarningWriterOptions{Deduplicate: true})
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, inputError("kubeconfig: %w", err)
	}
	jobs, err := newTrainJobs(cfg)
	if err != nil {
		return nil, inputError("kubeconfig: %w", err)
	}
	return &Cluster{Core: core, Jobs: jobs, Namespace: ns, NamespaceGiven: flags.Namespace != "",
		Host: flags.Describe(cfg)}, nil
}

// explain rewrites an error of reaching the API server so that it says which server and
// what to check; errors the API server answered, and cancellations, are left as they are.
func (c *Cluster) explain(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("cannot reach the Kubernetes API server of %s: %w (check --kubeconfig and --context)", c.Host, ue.Err)
	}
	return err
}

// jobError says what went wrong with one TrainJob: not found in the namespace, or the
// cluster not serving TrainJobs at all.
func (c *Cluster) jobError(ns, name string, err error) error {
	err = c.explain(err)
	switch {
	case apierrors.IsNotFound(err) && !servesTrainJobs(err):
		return notServed(c)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("TrainJob %q not found in namespace %q", name, ns)
	}
	return err
}

// servesTrainJobs tells a NotFound about one object from the API server's answer to a
// path it does not serve (the TrainJob CRD is not installed).
func servesTrainJobs(err error) bool {
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		return true
	}
	d := se.ErrStatus.Details
	return d != nil && d.Name != "" && !strings.Contains(se.ErrStatus.Message, "could not find the requested resource")
}

// notServed is the error of a cluster without the TrainJob CRD.
func notServed(c *Cluster) error {
	return fmt.Errorf("the cluster of %s does not serve TrainJobs (trainyard.dev/v1alpha1): "+
		"install Trainyard's operator first ('trainyard install')", c.Host)
}

// listError explains an error of listing TrainJobs.
func (c *Cluster) listError(err error) error {
	err = c.explain(err)
	if apierrors.IsNotFound(err) {
		return notServed(c)
	}
	return err
}

// invalidError turns the API server's refusal of an invalid object into an *InputError
// that lists each field it named, one per line.
func invalidError(what string, err error) error {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) {
		return err
	}
	var lines []string
	if d := se.ErrStatus.Details; d != nil {
		for _, cause := range d.Causes {
			switch {
			case strings.Contains(cause.Message, "validation rules were not checked"):
				// CEL rules skipped because of the errors listed: noise.
			case cause.Field == "" || cause.Field == "<nil>":
				// A rule on the whole object, whose message names the field.
				lines = append(lines, strings.TrimPrefix(cause.Message, "Invalid value: "))
			default:
				lines = append(lines, cause.Field+": "+cause.Message)
			}
		}
	}
	if len(lines) == 0 {
		lines = []string{se.ErrStatus.Message}
	}
	if len(lines) == 1 {
		return inputError("the cluster refused %s: %s", what, lines[0])
	}
	return inputError("the cluster refused %s:\n  %s", what, strings.Join(lines, "\n  "))
}
