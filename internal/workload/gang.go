package workload

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// addGang gives the worker container what the gang needs to restart in place: the port
// of worker 0's coordinator, the run's restarts so far (from the status the attempt is
// created under), which its restarts in place add to, the workers it went on without in
// place, and the key of the job's gang Secret, which authenticates the gang's messages.
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
		if len(d.Status.DroppedWorkers) > 0 {
			ids := make([]string, len(d.Status.DroppedWorkers))
			for i, w := range d.Status.DroppedWorkers {
				ids[i] = strconv.Itoa(int(w))
			}
			c.Env = append(c.Env, corev1.EnvVar{Name: EnvDroppedWorkers, Value: strings.Join(ids, ",")})
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvGangSecret, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: GangSecretName(d.Name)}, Key: GangSecretKey}}})
	}
}

// GangSecretKey is the key of the gang Secret's data that holds its key.
const GangSecretKey = "key"

// GangSecretName is the name of the job's gang Secret: "<job>-gang".
func GangSecretName(job string) string { return job + "-gang" }

// GangSecret is the job's gang Secret holding key, owned by the job: every pod of every
// attempt reads it (EnvGangSecret), so that nothing but the job's own workers can join,
// forge or replay the messages of its gang (internal/gang).
func GangSecret(job *v1.TrainJob, key []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: GangSecretName(job.Name), Namespace: job.Namespace,
			Labels:          map[string]string{LabelJob: job.Name, LabelJobUID: string(job.UID), LabelManagedBy: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{ownerRef(job)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{GangSecretKey: key},
	}
}
