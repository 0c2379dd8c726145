package kubecli

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// trainJobsResource is the TrainJob resource's plural name, as the API server serves it.
const trainJobsResource = "trainjobs"

// TrainJobs is a typed client of the TrainJob resource: a REST client over the group's
// path, without the discovery a generic client does first.
type TrainJobs struct {
	rc rest.Interface
}

// newTrainJobs returns a client of TrainJobs for the API server cfg names.
func newTrainJobs(cfg *rest.Config) (*TrainJobs, error) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, v1.GroupVersion)
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &v1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &TrainJobs{rc: rc}, nil
}

// Get returns the TrainJob ns/name.
func (t *TrainJobs) Get(ctx context.Context, ns, name string) (*v1.TrainJob, error) {
	job := &v1.TrainJob{}
	err := t.rc.Get().Namespace(ns).Resource(trainJobsResource).Name(name).Do(ctx).Into(job)
	return typed(job), err
}

// List returns the TrainJobs of ns, or of every namespace when ns is empty.
func (t *TrainJobs) List(ctx context.Context, ns string) ([]v1.TrainJob, error) {
	list := &v1.TrainJobList{}
	if err := t.rc.Get().Namespace(ns).Resource(trainJobsResource).Do(ctx).Into(list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		typed(&list.Items[i])
	}
	return list.Items, nil
}

// Create creates job in its namespace; with dryRun the API server checks and defaults it
// and stores nothing.
func (t *TrainJobs) Create(ctx context.Context, job *v1.TrainJob, dryRun bool) (*v1.TrainJob, error) {
	opts := &metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out := &v1.TrainJob{}
	err := t.rc.Post().Namespace(job.Namespace).Resource(trainJobsResource).
		VersionedParams(opts, metav1.ParameterCodec).Body(job).Do(ctx).Into(out)
	return typed(out), err
}

// MergePatch applies a JSON merge patch to ns/name's spec or metadata.
func (t *TrainJobs) MergePatch(ctx context.Context, ns, name string, patch []byte) (*v1.TrainJob, error) {
	out := &v1.TrainJob{}
	err := t.rc.Patch(types.MergePatchType).Namespace(ns).Resource(trainJobsResource).Name(name).
		Body(patch).Do(ctx).Into(out)
	return typed(out), err
}

// Delete deletes ns/name; its dependents (the attempts' Jobs, Services and pods) go with
// it as propagation says.
func (t *TrainJobs) Delete(ctx context.Context, ns, name string, propagation metav1.DeletionPropagation) error {
	return t.rc.Delete().Namespace(ns).Resource(trainJobsResource).Name(name).
		Body(&metav1.DeleteOptions{PropagationPolicy: &propagation}).Do(ctx).Error()
}

// typed sets the apiVersion and kind that decoding into a Go type leaves out, so that -o
// yaml prints a document that can be applied again, and drops the managed fields, which
// kubectl does not print either.
func typed(job *v1.TrainJob) *v1.TrainJob {
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	job.ManagedFields = nil
	return job
}
