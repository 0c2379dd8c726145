package server

import (
	"maps"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// rayTrainJob is the TrainJob of a Ray submission: one worker, one process running the
// entrypoint with /bin/sh, with the resources and environment the submission asks for;
// a Ray Train script in it is Ray's driver (v1.AnnotationGang).
func rayTrainJob(req *raySubmit) *v1.TrainJob {
	one := int32(1)
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &one, ProcsPerWorker: &one,
		Command: []string{"/bin/sh", "-c", req.Entrypoint}, Env: envList(req.Env.EnvVars)}}
	// The entrypoint is Ray's driver: a TorchTrainer's fit() in it starts its gang.
	job.Annotations = map[string]string{v1.AnnotationGang: v1.GangImplicit}
	setResources(&job.Spec.Resources, req)
	return job
}

// setResources sets what the submission reserves: whole GPUs, CPU (rounded up to a
// thousandth of a core) and memory; zero reserves nothing.
func setResources(r *v1.WorkerResources, req *raySubmit) {
	if req.NumGPUs != nil {
		r.GPU = *req.NumGPUs
	}
	if req.NumCPUs != nil && *req.NumCPUs > 0 {
		r.CPU = resource.NewMilliQuantity(int64(math.Ceil(*req.NumCPUs*1000)), resource.DecimalSI)
	}
	if req.MemoryBytes != nil && *req.MemoryBytes > 0 {
		r.Memory = resource.NewQuantity(*req.MemoryBytes, resource.BinarySI)
	}
}

// envList returns env_vars as the job's environment, sorted by name.
func envList(vars map[string]string) []v1.EnvVar {
	var env []v1.EnvVar
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, v1.EnvVar{Name: name, Value: vars[name]})
	}
	return env
}
