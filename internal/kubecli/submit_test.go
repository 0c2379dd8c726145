package kubecli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// buildJob parses args as submit would and builds the job.
func buildJob(t *testing.T, args ...string) (*v1.TrainJob, []string, error) {
	t.Helper()
	var (
		flags jobspec.Flags
		kf    JobFlags
	)
	fs := pflag.NewFlagSet("submit", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	flags.Bind(fs)
	kf.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return BuildJob(&flags, &kf, fs.Args())
}

func TestBuildJob(t *testing.T) {
	job, warnings, err := buildJob(t, "--image", "img:1", "--workers", "2", "--node-selector", "pool=h100", "--node-selector", "zone=a",
		"--priority-class", "high", "--", "python3", "-u", "scripts/Train_GPT2.py", "--epochs", "3")
	if err != nil {
		t.Fatal(err)
	}
	k := job.Spec.Kubernetes
	if job.Name != "" || job.GenerateName != "train-gpt2-" || k.Image != "img:1" || k.PriorityClassName != "high" ||
		k.NodeSelector["pool"] != "h100" || k.NodeSelector["zone"] != "a" || job.Spec.StoragePath != "" || job.Spec.WorkingDir != "" ||
		job.Spec.ProcsPerWorker != nil || job.APIVersion != v1.APIVersion || job.Kind != v1.Kind {
		t.Errorf("job %+v, spec %+v, kubernetes %+v", job.ObjectMeta, job.Spec, k)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "no volume is mounted at the storage path /trainyard/results") {
		t.Errorf("warnings %q", warnings)
	}

	// A job printed by 'get -o yaml', edited and submitted again.
	file := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: again, namespace: team-a, uid: "1234", resourceVersion: "99", generation: 3}
spec:
  command: [python3, train.py]
  workingDir: src
  storagePath: /data/runs
  kubernetes:
    image: img:2
    volumeMounts: [{name: data, mountPath: /data}]
status: {phase: Running, attempt: 3}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	job, warnings, err = buildJob(t, "-f", file, "--queue", "q")
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "again" || job.Namespace != "team-a" || job.UID != "" || job.ResourceVersion != "" || job.Generation != 0 ||
		job.Status.Phase != "" || job.Spec.WorkingDir != "src" || job.Spec.Kubernetes.QueueName != "q" || len(warnings) != 0 {
		t.Errorf("from the file: %+v %+v %+v, warnings %q", job.ObjectMeta, job.Spec, job.Status, warnings)
	}
}

func TestBuildJobRefuses(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"no image":          {args: []string{"--", "python3", "train.py"}, want: "no image: on Kubernetes every worker runs in a container"},
		"no command":        {args: []string{"--image", "img:1"}, want: "invalid job: the command after -- (spec.command): Required value"},
		"bad node selector": {args: []string{"--image", "img:1", "--node-selector", "pool", "--", "true"}, want: `--node-selector "pool": must be KEY=VALUE`},
		"bad quantity":      {args: []string{"--image", "img:1", "--memory-per-worker", "lots", "--", "true"}, want: `--memory-per-worker "lots": not a quantity`},
		"no such file":      {args: []string{"-f", "/nonexistent/job.yaml", "--image", "img:1"}, want: "read job file: open /nonexistent/job.yaml"},
		"bad pod template":  {args: []string{"-f", badTemplate(t)}, want: "spec.kubernetes.podTemplate: "},
		"logdir alone":      {args: []string{"--image", "img:1", "--logdir", "/data/logs", "--", "true"}, want: "--logdir and --tensorboard-image say how to run the job's TensorBoard: give --tensorboard too"},
		"relative logdir":   {args: []string{"--image", "img:1", "--tensorboard", "--logdir", "logs", "--", "true"}, want: `--logdir "logs": give an absolute, clean path`},
		"tensorboard without a volume": {args: []string{"--image", "img:1", "--tensorboard", "--", "true"},
			want: "--tensorboard: TensorBoard reads /trainyard/results/"},
		"bad label": {args: []string{"--image", "img:1", "--label", "team", "--", "true"}, want: `--label "team": must be KEY=VALUE`},
		"secret without source": {args: []string{"--image", "img:1", "--sync-secret", "creds", "--", "true"},
			want: "--sync-secret names the credentials of a git source: give --sync-source URL too"},
		"ssh source": {args: []string{"--image", "img:1", "--sync-source", "ssh://git@h/o/r.git", "--", "true"}, want: "invalid job: --sync-source (spec.source.git): "},
		"slices without a queue": {args: []string{"--image", "img:1", "--workers", "2:4", "--workload-slices", "--", "true"},
			want: "--workload-slices grows a gang through Kueue: give --queue too"},
		"slices of a fixed gang": {args: []string{"--image", "img:1", "--workers", "4", "--queue", "q", "--workload-slices", "--", "true"},
			want: "--workload-slices grows an elastic gang: give --workers MIN:MAX too"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := buildJob(t, tc.args...)
			var ie *InputError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("BuildJob: %v; want an *InputError starting %q", err, tc.want)
			}
		})
	}
}

// --workload-slices gives an elastic gang in a queue Kueue's annotation for workload slices.
func TestBuildJobWorkloadSlices(t *testing.T) {
	job, _, err := buildJob(t, "--image", "img:1", "--workers", "2:4", "--queue", "team-a", "--workload-slices", "--", "python3", "train.py")
	if err != nil {
		t.Fatal(err)
	}
	if job.Annotations[ElasticJobAnnotation] != "true" || job.Spec.MinWorkerCount() != 2 || job.Spec.Kubernetes.QueueName != "team-a" {
		t.Errorf("job %+v, spec %+v; want the annotation %s=true on a 2:4 gang in team-a", job.ObjectMeta, job.Spec, ElasticJobAnnotation)
	}
}

// Arena's command line, flag for flag.
func TestBuildJobArenaFlags(t *testing.T) {
	job, _, err := buildJob(t, "--name=pytorch-dist", "--gpus=1", "--workers=3", "--workdir=/root", "--image=img:1",
		"--sync-mode=git", "--sync-source=https://git.example.com/t/mnist-pytorch.git", "--data=training-data:/mnist_data",
		"--tensorboard", "--logdir=/mnist_data/pytorch_data/logs", "--selector", "gpu=a100", "--toleration", "all",
		"--toleration", "dedicated", "--annotation", "a=b", "--label", "team=x", "-e", "GIT_SYNC_USERNAME=alice",
		"-e", "GIT_SYNC_PASSWORD=pw", "--", "python", "/root/code/mnist-pytorch/mnist.py", "--epochs", "10")
	if err != nil {
		t.Fatal(err)
	}
	k := job.Spec.Kubernetes
	if job.Spec.Resources.GPU != 1 || *job.Spec.Workers != 3 || job.Spec.WorkingDir != "/root" ||
		job.Spec.Source.Git.URL != "https://git.example.com/t/mnist-pytorch.git" || k.TensorBoard.LogDir != "/mnist_data/pytorch_data/logs" ||
		k.NodeSelector["gpu"] != "a100" || k.PodAnnotations["a"] != "b" || k.PodLabels["team"] != "x" || len(k.Tolerations) != 2 ||
		k.Tolerations[0].Key != "" || k.Tolerations[1].Key != "dedicated" || k.Tolerations[1].Operator != "Exists" {
		t.Errorf("job = %+v\nkubernetes = %+v", job.Spec, k)
	}
	creds := TakeCredentials(job, []string{"GIT_SYNC_USERNAME=bob"})
	if creds == nil || creds.Username != "alice" || creds.Password != "pw" {
		t.Errorf("credentials = %+v; the job's --env wins", creds)
	}
	for _, e := range job.Spec.Env {
		if strings.HasPrefix(e.Name, "GIT_SYNC_") {
			t.Errorf("the TrainJob keeps %s in clear", e.Name)
		}
	}
}

func TestNamePrefix(t *testing.T) {
	cases := map[string][]string{
		"train-":                          {"python3", "train.py", "--epochs", "3"},
		"train-gpt2-":                     {"/usr/bin/python3", "-u", "/app/Train_GPT2.py"},
		"torchrun-":                       {"torchrun"},
		"job-":                            {"--flag"},
		"a-very-long-script-name-that-g-": {"python3", "a_very_long_script_name_that_goes_on_and_on.py"},
		"x-":                              {"python3", "2x.py"},
	}
	for want, command := range cases {
		got := namePrefix(command)
		if got != want {
			t.Errorf("namePrefix(%q) = %q, want %q", command, got, want)
		}
		if len(got)+5 > 45 {
			t.Errorf("namePrefix(%q) = %q: too long for the API server's 5 characters", command, got)
		}
	}
}

// badTemplate writes a job file whose pod template override names a field pods do not have.
func badTemplate(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "job.yaml")
	doc := `apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: x}
spec:
  command: [python3, train.py]
  kubernetes:
    image: img:1
    podTemplate: {spec: {hostIPCC: true}}
`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// submit --kube refuses up front, as input (exit 2), a job whose pods the operator's pod
// policy refuses, naming the fields; --pod-policy=off leaves it to the cluster. A pod
// template that panicked the merge is refused with its field.
func TestBuildJobPodPolicy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: escape}
spec:
  command: [python3, train.py]
  kubernetes:
    image: img:1
    serviceAccountName: kube-proxy
    podTemplate:
      spec:
        hostNetwork: true
        hostPID: true
        serviceAccountName: kube-proxy
        containers: [{name: worker, securityContext: {privileged: true}, volumeMounts: [{name: root, mountPath: /host}]}]
        volumes: [{name: root, hostPath: {path: /}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := buildJob(t, "-f", file)
	var in *InputError
	if !errors.As(err, &in) {
		t.Fatalf("BuildJob = %v, want an *InputError", err)
	}
	for _, want := range []string{"the operator's pod policy (restricted) refuses the job's pods",
		"spec.kubernetes.podTemplate.spec.hostNetwork: host namespaces are refused", "spec.kubernetes.podTemplate.spec.hostPID",
		"spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged: privileged containers are refused",
		"spec.kubernetes.podTemplate.spec.volumes[0].hostPath: hostPath volumes are refused", "nothing was created", "--pod-policy=off"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "serviceAccountName") {
		t.Errorf("without a cluster the service account cannot be checked, yet: %v", err)
	}
	if _, _, err := buildJob(t, "--pod-policy=off", "-f", file); err != nil {
		t.Errorf("--pod-policy=off: %v", err)
	}
	if _, _, err := buildJob(t, "--pod-policy=baseline", "-f", file); err == nil || !strings.Contains(err.Error(), "--pod-policy") {
		t.Errorf("--pod-policy=baseline: %v", err)
	}

	if err := os.WriteFile(file, []byte("apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"+
		"spec: {command: [python3], kubernetes: {image: i, podTemplate: {spec: {containers: [{name: []}]}}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = buildJob(t, "-f", file)
	if !errors.As(err, &in) || !strings.Contains(err.Error(), "spec.kubernetes.podTemplate") || !strings.Contains(err.Error(), "spec.containers.name") {
		t.Errorf("a list as a container's name: %v, want an input error naming spec.containers.name", err)
	}
}

// submit --kube (and its --dry-run=client, which asks no cluster) refuses the gaps of the
// security issue too: an Unconfined AppArmor annotation on the pod template, the SELinux
// type spc_t, a gitRepo volume; each named by its field.
func TestBuildJobPodPolicyRestricted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: escape}
spec:
  command: [python3, train.py]
  kubernetes:
    image: img:1
    podTemplate:
      metadata:
        annotations: {container.apparmor.security.beta.kubernetes.io/worker: unconfined}
      spec:
        containers: [{name: worker, securityContext: {seLinuxOptions: {type: spc_t}}, volumeMounts: [{name: code, mountPath: /code}]}]
        volumes: [{name: code, gitRepo: {repository: "https://git.example.com/x.git"}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := buildJob(t, "--dry-run=client", "-f", file)
	var in *InputError
	if !errors.As(err, &in) {
		t.Fatalf("BuildJob = %v, want an *InputError (exit 2)", err)
	}
	for _, want := range []string{"the operator's pod policy (restricted) refuses the job's pods",
		"spec.kubernetes.podTemplate.metadata.annotations[container.apparmor.security.beta.kubernetes.io/worker]: profile unconfined is refused",
		"spec.kubernetes.podTemplate.spec.containers[0].securityContext.seLinuxOptions.type: SELinux type spc_t is refused",
		"spec.kubernetes.podTemplate.spec.volumes[0].gitRepo: gitRepo volumes are refused", "nothing was created"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
	if _, _, err := buildJob(t, "--dry-run=client", "--pod-policy=off", "-f", file); err != nil {
		t.Errorf("--pod-policy=off: %v", err)
	}
}

// A job file written for this machine, submitted to a cluster: "~" paths are said to be
// the container's, and a file:// git source, which no pod can reach, is refused.
func TestBuildJobPathsOfThisMachine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
spec:
  command: [python3, train.py]
  storagePath: ~/trainyard_results
  workingDir: ~/project
  kubernetes: {image: img:1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, warnings, err := buildJob(t, "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{"spec.storagePath ~/trainyard_results: in a pod, ~ is the home folder of the container's user",
		"spec.workingDir ~/project: in a pod, ~ is the home folder"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
	_, _, err = buildJob(t, "--image", "img:1", "--sync-source", "file:///home/me/repo", "--", "python3", "train.py")
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "--sync-source file:///home/me/repo is a repository on this machine") {
		t.Errorf("a file:// source: %v", err)
	}
}
