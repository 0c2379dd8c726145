package workload

import (
	"fmt"
	"path/filepath"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// TensorBoard's objects.
const (
	// LabelTensorBoard names the TrainJob a TensorBoard Deployment, Service and pod
	// belong to. They have no LabelJob: they are not workers.
	LabelTensorBoard = "trainyard.dev/tensorboard"
	// TensorBoardPort is the port TensorBoard serves on, in its pod and its Service.
	TensorBoardPort      = 6006
	tensorBoardContainer = "tensorboard"
)

// TensorBoard is what the operator creates for a TrainJob's spec.kubernetes.tensorboard:
// a Deployment of one TensorBoard and a ClusterIP Service, both owned by the TrainJob.
type TensorBoard struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
}

// TensorBoardName is the name of a TrainJob's TensorBoard Deployment and Service.
func TensorBoardName(job string) string { return job + "-tensorboard" }

// TensorBoardLogDir is the folder a job's TensorBoard reads: spec.kubernetes.tensorboard's
// logDir, else the run folder (where the reports' event files are written).
func TensorBoardLogDir(job *v1.TrainJob) string {
	d := Defaulted(job)
	if tb := d.Spec.Kubernetes.TensorBoard; tb != nil && tb.LogDir != "" {
		return filepath.Clean(tb.LogDir)
	}
	return RunDir(d)
}

// RenderTensorBoard returns job's TensorBoard objects, or nil when the job asks for none.
// TensorBoard reads the log folder from the worker volume mounted there, read-only; it
// fails when no volume of the workers holds that folder (an emptyDir would be another).
func RenderTensorBoard(job *v1.TrainJob) (*TensorBoard, error) {
	d := Defaulted(job)
	tb := d.Spec.Kubernetes.TensorBoard
	if tb == nil {
		return nil, nil
	}
	logDir := TensorBoardLogDir(d)
	mounts, vols := logVolumes(d.Spec.Kubernetes, logDir)
	if len(mounts) == 0 {
		return nil, fmt.Errorf("TensorBoard reads %s, which no volume of the workers holds: mount a PersistentVolumeClaim there "+
			"(--data NAME:PATH, or spec.kubernetes.volumes and volumeMounts)", logDir)
	}
	image := tb.Image
	if image == "" {
		image = v1.DefaultTensorBoardImage
	}
	name := TensorBoardName(d.Name)
	labels := map[string]string{LabelTensorBoard: d.Name, LabelManagedBy: ManagedBy}
	meta := metav1.ObjectMeta{Name: name, Namespace: d.Namespace, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{ownerRef(d)}}
	pod := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: tensorBoardContainer, Image: image,
			Command: []string{"tensorboard", "--logdir", logDir, "--host", "0.0.0.0", "--port", fmt.Sprint(TensorBoardPort)},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: TensorBoardPort, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			},
			VolumeMounts:    mounts,
			SecurityContext: containerSecurity(),
		}},
		SecurityContext:              podSecurity(),
		AutomountServiceAccountToken: ptr(false),
		Volumes:                      vols,
		ImagePullSecrets:             d.Spec.Kubernetes.ImagePullSecrets,
		NodeSelector:                 d.Spec.Kubernetes.NodeSelector,
	}
	return &TensorBoard{
		Deployment: &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: *meta.DeepCopy(),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelTensorBoard: d.Name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
			},
		},
		Service: &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: *meta.DeepCopy(),
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{LabelTensorBoard: d.Name},
				Ports: []corev1.ServicePort{{Name: "http", Port: TensorBoardPort, Protocol: corev1.ProtocolTCP,
					TargetPort: intstr.FromInt32(TensorBoardPort)}},
			},
		},
	}, nil
}

// logVolumes are the worker's mounts that hold dir (read-only here) and their volumes.
func logVolumes(k *v1.KubernetesSpec, dir string) ([]corev1.VolumeMount, []corev1.Volume) {
	var mounts []corev1.VolumeMount
	var vols []corev1.Volume
	for _, m := range k.VolumeMounts {
		if !mounted([]corev1.VolumeMount{m}, dir) {
			continue
		}
		i := slices.IndexFunc(k.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			continue
		}
		m.ReadOnly = true
		mounts = append(mounts, m)
		if !slices.ContainsFunc(vols, func(v corev1.Volume) bool { return v.Name == m.Name }) {
			vols = append(vols, k.Volumes[i])
		}
	}
	return mounts, vols
}

// TensorBoardAccess says how to reach a job's TensorBoard from the user's machine.
func TensorBoardAccess(namespace, job string) string {
	return fmt.Sprintf("kubectl port-forward -n %s svc/%s %d:%d, then open http://localhost:%d", namespace,
		TensorBoardName(job), TensorBoardPort, TensorBoardPort, TensorBoardPort)
}
