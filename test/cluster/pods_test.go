package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trainyard/trainyard/internal/testcluster"
)

// busyboxPod is a pod of one busybox container running script.
func busyboxPod(name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: testcluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", script},
			}},
		},
	}
}

// waitPod waits until ok says the pod is as wanted, failing the test after timeout.
func waitPod(t *testing.T, cs kubernetes.Interface, name string, timeout time.Duration, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last *corev1.Pod
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s: not as wanted within %s; last status: %+v", name, timeout, podStatus(last))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func podStatus(p *corev1.Pod) string {
	if p == nil {
		return "(none)"
	}
	return fmt.Sprintf("phase %s, conditions %+v, containers %+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
}

func ended(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func logsOf(t *testing.T, cs kubernetes.Interface, pod string) string {
	t.Helper()
	b, err := cs.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s: %v", pod, err)
	}
	return string(b)
}

func deletePod(cs kubernetes.Interface, name string) {
	zero := int64(0)
	_ = cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// A pod runs on the real kubelet, containerd and runc, and its output comes back through
// the API server from kubelet.
func TestAPodRunsAndPrints(t *testing.T) {
	cs := cluster(t).Client
	pod, err := cs.CoreV1().Pods("default").Create(context.Background(), busyboxPod("hello", "echo hello from $(hostname)"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer deletePod(cs, pod.Name)
	p := waitPod(t, cs, pod.Name, 2*time.Minute, ended)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod ended %s: %s", p.Status.Phase, podStatus(p))
	}
	if got := logsOf(t, cs, pod.Name); !strings.Contains(got, "hello from hello") {
		t.Errorf("logs %q, want %q", got, "hello from hello")
	}
}

// An Indexed Job's pod 1 finds pod 0 by its headless-Service name through CoreDNS and
// reaches it, as a gang's workers find MASTER_ADDR.
func TestIndexedJobPodsResolveEachOther(t *testing.T) {
	cs := cluster(t).Client
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gang"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{"batch.kubernetes.io/job-name": "gang"},
		},
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Services("default").Delete(ctx, "gang", metav1.DeleteOptions{})
	two := int32(2)
	indexed := batchv1.IndexedCompletion
	script := `if [ "$JOB_COMPLETION_INDEX" = 0 ]; then echo pong | nc -l -p 8080; exit 0; fi
for i in $(seq 1 60); do
  if echo ping | nc -w 2 gang-0.gang 8080 | grep -q pong; then echo "reached gang-0.gang"; exit 0; fi
  sleep 1
done
nslookup gang-0.gang; exit 1`
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "gang"},
		Spec: batchv1.JobSpec{
			Completions: &two, Parallelism: &two, CompletionMode: &indexed, BackoffLimit: new(int32),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Subdomain: "gang", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: testcluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", script},
				}},
			}},
		},
	}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	background := metav1.DeletePropagationBackground
	defer cs.BatchV1().Jobs("default").Delete(ctx, "gang", metav1.DeleteOptions{PropagationPolicy: &background})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j, err := cs.BatchV1().Jobs("default").Get(ctx, "gang", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Succeeded == 2 {
			break
		}
		if j.Status.Failed > 0 || time.Now().After(deadline) {
			pods, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=gang"})
			for _, p := range pods.Items {
				t.Logf("pod %s: %s; logs: %s", p.Name, podStatus(&p), logsOf(t, cs, p.Name))
			}
			t.Fatalf("job gang: succeeded %d, failed %d", j.Status.Succeeded, j.Status.Failed)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// GPUs advertised on the node are scheduled for real: a pod asking for one runs, one
// asking for more than the node has is Unschedulable with the scheduler's reason.
func TestGPUsAreScheduled(t *testing.T) {
	cs := cluster(t).Client
	ctx := context.Background()
	withGPUs := func(name string, n int64) *corev1.Pod {
		p := busyboxPod(name, "true")
		q := *resource.NewQuantity(n, resource.DecimalSI)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": q}, Limits: corev1.ResourceList{"nvidia.com/gpu": q},
		}
		return p
	}
	for _, p := range []*corev1.Pod{withGPUs("one-gpu", 1), withGPUs("too-many-gpus", gpus+1)} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer deletePod(cs, p.Name)
	}
	if p := waitPod(t, cs, "one-gpu", 2*time.Minute, ended); p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("one-gpu ended %s", podStatus(p))
	}
	waitPod(t, cs, "too-many-gpus", time.Minute, func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, "Insufficient nvidia.com/gpu") {
				return true
			}
		}
		return false
	})
}
