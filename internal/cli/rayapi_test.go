package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/kubecli"
)

// The server command that install --ray-api-image puts in its Deployment parses: its
// flags are this binary's.
func TestRayAPIServerCommandParses(t *testing.T) {
	objs, err := install.Render(install.Options{RayAPI: install.RayAPI{Image: "train:1", Claim: "data"}})
	if err != nil {
		t.Fatal(err)
	}
	var command []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != install.RayAPIName {
			continue
		}
		containers := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
		for _, a := range containers[0].(map[string]any)["command"].([]any) {
			command = append(command, a.(string))
		}
	}
	if len(command) < 2 || command[1] != "server" {
		t.Fatalf("the Jobs API's command %q; want trainyard server", command)
	}
	var out, errOut bytes.Buffer
	argv := withHelp(NewRoot(IO{}), command[1:])
	if code := Main(context.Background(), argv, IO{In: strings.NewReader(""), Out: &out, Err: &errOut}); code != 0 {
		t.Errorf("`trainyard %s` does not parse (exit %d): %s", strings.Join(command[1:], " "), code, errOut.String())
	}
}

// The gang of an in-cluster server's job becomes a TrainJob in the server's image, its
// claim mounted, its run folder where the driver looks, with the job's variables.
func TestClusterGangJob(t *testing.T) {
	cg := ClusterGang{Namespace: "team-a", Image: "registry.local/train:3", Claim: "data", MountPath: "/shared", Job: "raysubmit_AbC"}
	kf, err := clusterJobFlags(cg)
	if err != nil {
		t.Fatal(err)
	}
	var flags jobspec.Flags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	flags.Bind(fs)
	if err := fs.Parse([]string{"--workers", "2", "--storage-path", "/shared/results", "--name", "raysubmit-abc-123456-train",
		"--cpus-per-worker", "200m"}); err != nil {
		t.Fatal(err)
	}
	flags.WorkingDir = "/shared/.trainyard-ray-api/workdirs/x/project" // runOnCluster: the driver's folder
	job, _, err := kubecli.BuildJob(&flags, kf, []string{"/usr/bin/python3", "-c", "boot", "/shared/results/d/ray-driver/x.pkl"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvJobEnvNames, "WANDB_MODE,TRAINYARD_GPU_LEASE_SECRET")
	t.Setenv("WANDB_MODE", "offline")
	t.Setenv("TRAINYARD_GPU_LEASE_SECRET", "s3cret")
	passJobEnv(job)
	k := job.Spec.Kubernetes
	if k == nil || k.Image != cg.Image || len(k.Volumes) != 1 || k.Volumes[0].PersistentVolumeClaim.ClaimName != "data" || k.VolumeMounts[0].MountPath != "/shared" {
		t.Fatalf("spec.kubernetes %+v; want the server's image and claim", k)
	}
	if len(job.Spec.Env) != 1 || job.Spec.Env[0].Name != "WANDB_MODE" || job.Spec.Env[0].Value != "offline" {
		t.Errorf("env %+v; want the job's WANDB_MODE and nothing of Trainyard's own (the lease's secret)", job.Spec.Env)
	}
	if job.Name != "raysubmit-abc-123456-train" || job.Spec.WorkerCount() != 2 || job.Spec.WorkingDir != "/shared/.trainyard-ray-api/workdirs/x/project" {
		t.Errorf("job %s: %d workers in %s", job.Name, job.Spec.WorkerCount(), job.Spec.WorkingDir)
	}
}

// A gang placement the operator does not know is refused before it connects anywhere.
func TestOperatorGangPlacementRefused(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"operator", "--gang-placement", "sometimes", "--kubeconfig", "/nonexistent"},
		IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != 2 || !strings.Contains(errOut.String(), `--gang-placement "sometimes": give one of auto, operator, off`) {
		t.Errorf("exit %d, %q; want 2 and the values to give", code, errOut.String())
	}
}
