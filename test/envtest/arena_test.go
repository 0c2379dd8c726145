package envtest_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/testgit"
)

// Arena's command line against a real API server: the branch of a private repository
// (served over HTTP by the test) is pinned to its commit before anything is created, the
// credentials go into a Secret the TrainJob owns and not into the TrainJob, and bad
// sources create nothing.
func TestCLIArena(t *testing.T) {
	k := newCLICluster(t)
	repo := testgit.New(t, "mnist-pytorch", map[string]string{"mnist.py": "print('hi')\n"})
	tip := repo.Commit("main", "second", map[string]string{"VERSION": "2\n"})
	url := repo.Serve("127.0.0.1:0", "alice", "s3cret")
	k.create(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "training-data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	arena := func(name string, extra ...string) (int, string) {
		args := append([]string{"--name=" + name, "--gpus=1", "--workers=3", "--working-dir=/root", "--image=img:1",
			"--sync-mode=git", "--sync-source=" + url, "--data=training-data:/mnist_data", "--tensorboard",
			"--logdir=/mnist_data/pytorch_data/logs", "--env", "GIT_SYNC_USERNAME=alice"}, extra...)
		args = append(args, "--", "python", "/root/code/mnist-pytorch/mnist.py", "--epochs", "10", "--data", "/mnist_data/pytorch_data/")
		code, _, errOut := k.trainyard([]string{"submit"}, args...)
		return code, errOut
	}
	secrets := func() []corev1.Secret {
		var list corev1.SecretList
		if err := k.env.Client.List(k.ctx, &list, client.InNamespace(k.ns)); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}

	for _, c := range []struct{ name, password, branch, want string }{
		{"wrong-password", "nope", "", "refused the credentials of GIT_SYNC_USERNAME (alice)"},
		{"unknown-branch", "s3cret", "dev", `has no branch "dev"; its branches: main; nothing was created`},
	} {
		extra := []string{"--env", "GIT_SYNC_PASSWORD=" + c.password}
		if c.branch != "" {
			extra = append(extra, "--sync-branch", c.branch)
		}
		code, errOut := arena(c.name, extra...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", c.name, code, c.want, errOut)
		}
		err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: c.name}, &v1alpha1.TrainJob{})
		if !apierrors.IsNotFound(err) || len(secrets()) != 0 {
			t.Errorf("%s: a refused job left a TrainJob (%v) or Secrets (%d)", c.name, err, len(secrets()))
		}
	}

	code, errOut := arena("pytorch-dist", "--env", "GIT_SYNC_PASSWORD=s3cret", "--priority=team-a-high")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, errOut)
	}
	job := k.job("pytorch-dist")
	g := job.Spec.Source.Git
	if g.URL != url || g.Revision != tip || g.CredentialsSecret == "" || job.Spec.WorkingDir != "/root" ||
		job.Spec.Kubernetes.TensorBoard.LogDir != "/mnist_data/pytorch_data/logs" {
		t.Errorf("spec.source.git = %+v, workingDir %q, tensorboard %+v", g, job.Spec.WorkingDir, job.Spec.Kubernetes.TensorBoard)
	}
	if pc := job.Spec.Kubernetes.PriorityClassName; pc != "team-a-high" {
		t.Errorf("--priority on --kube is Arena's PriorityClass; spec.kubernetes.priorityClassName = %q", pc)
	}
	if who := job.Annotations[v1alpha1.AnnotationSubmittedBy]; who == "" {
		t.Errorf("no %s annotation: the user the API server authenticated the CLI as", v1alpha1.AnnotationSubmittedBy)
	} else {
		t.Logf("submitted by %s", who)
	}
	for _, e := range job.Spec.Env {
		if strings.HasPrefix(e.Name, "GIT_SYNC_") {
			t.Errorf("the TrainJob holds %s in clear", e.Name)
		}
	}
	var secret corev1.Secret
	if err := k.env.Client.Get(k.ctx, client.ObjectKey{Namespace: k.ns, Name: g.CredentialsSecret}, &secret); err != nil {
		t.Fatalf("the credentials Secret: %v", err)
	}
	if string(secret.Data["username"]) != "alice" || string(secret.Data["password"]) != "s3cret" ||
		len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != job.UID {
		t.Errorf("Secret %s: data keys %d, owners %+v", secret.Name, len(secret.Data), secret.OwnerReferences)
	}
}
