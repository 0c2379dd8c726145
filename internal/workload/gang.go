package workload

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// addGang gives the worker container what the gang needs to restart in place: the port
// of worker 0's coordinator, and the run's restarts so far (from the status the attempt
// is created under), which its restarts in place add to.
func addGang(d *v1.TrainJob, spec *corev1.PodSpec) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != WorkerContainer {
			continue
		}
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "gang", ContainerPort: GangPort, Protocol: corev1.ProtocolTCP})
		if n := d.Status.Restarts; n > 0 {
			c.Env = append(c.Env, corev1.EnvVar{Name: EnvRestarts, Value: strconv.Itoa(int(n))})
		}
		if n := d.Status.Disruptions; n > 0 {
			c.Env = append(c.Env, corev1.EnvVar{Name: EnvDisruptions, Value: strconv.Itoa(int(n))})
		}
	}
}
