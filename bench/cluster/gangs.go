package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// -gangs measures gangs placed whole without a queue (issue 44): -gang-count gangs of 3
// workers x 1 GPU, each running -gang-seconds once all its workers run, created at the
// same moment on the node's 4 GPUs. Timed from their creation until every gang ended,
// with how many failed, in three rounds on the same cluster and operator:
//
//   - operator: in no queue, the operator's gang placement (internal/gangroom);
//   - kueue: the same gangs in a Kueue queue of 4 GPUs (the peer: Kueue admits a gang whole);
//   - off: in no queue with the operator's --gang-placement=off, the scheduler placing each
//     pod on its own, as main did before (its gangs split the GPUs and fail after their
//     worker 0 stops waiting, five minutes).

// gangRound is what one round measured.
type gangRound struct {
	name           string
	took           time.Duration
	succeeded, all int
	givenBack      int32
}

// gangsBench runs the three rounds (Kueue runs: run started it before the operator).
func (b *bench) gangsBench(ctx context.Context, count int, seconds int) error {
	if err := b.sliceQueueObjects(ctx); err != nil {
		return err
	}
	if err := standInSMI(b.shared+"/smi", 4); err != nil {
		return err
	}
	var rounds []gangRound
	for _, name := range []string{"operator", "kueue", "off"} {
		if name == "off" {
			if err := b.operatorArgs(ctx, "--gang-placement=off"); err != nil {
				return err
			}
		}
		r, err := b.gangRound(ctx, name, count, seconds)
		if err != nil {
			return fmt.Errorf("round %s: %w", name, err)
		}
		fmt.Printf("%s round %-8s: %d gangs of 3 x 1 GPU, %ds each, on 4 GPUs: all ended in %6.1f s; %d succeeded, %d failed; %d give-backs; load %s\n",
			time.Now().UTC().Format("15:04:05"), r.name, r.all, seconds, r.took.Seconds(), r.succeeded, r.all-r.succeeded, r.givenBack, loadavg())
		rounds = append(rounds, r)
	}
	op, kq := rounds[0], rounds[1]
	fmt.Printf("\noperator's placement / Kueue: %.2f (goal at most 1.2); floor (one gang after another): %d s\n",
		op.took.Seconds()/kq.took.Seconds(), count*seconds)
	return nil
}

// gangRound creates count gangs at once (in the Kueue queue for the kueue round) and
// waits until every one ended.
func (b *bench) gangRound(ctx context.Context, round string, count, seconds int) (gangRound, error) {
	r := gangRound{name: round, all: count}
	var names []string
	var bodies [][]byte
	for i := range count {
		tj := b.trainJob(fmt.Sprintf("%s-%d", round, i), []string{"python3", "-c", fmt.Sprintf("import time; time.sleep(%d)", seconds)})
		tj.Spec.Workers, tj.Spec.MaxRestarts = ptr(int32(3)), 0
		tj.Spec.Resources = v1.WorkerResources{GPU: 1, CPU: ptr(resource.MustParse("10m")), Memory: ptr(resource.MustParse("256Mi"))}
		tj.Spec.Kubernetes.VolumeMounts = append(tj.Spec.Kubernetes.VolumeMounts, smiMount)
		if round == "kueue" {
			tj.Spec.Kubernetes.QueueName = sliceQueue
		}
		body, err := json.Marshal(tj)
		if err != nil {
			return r, err
		}
		names, bodies = append(names, tj.Name), append(bodies, body)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, count)
	for i := range count {
		wg.Go(func() {
			errs[i] = b.cl.Client.CoreV1().RESTClient().Post().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs").
				Body(bodies[i]).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	defer func() {
		for _, n := range names {
			b.remove(ctx, n)
		}
	}()
	ended := map[string]v1.TrainJobStatus{}
	err := poll(time.Duration(count*seconds)*time.Second+10*time.Minute, "every gang ended", func() bool {
		for _, n := range names {
			if _, ok := ended[n]; ok {
				continue
			}
			if st, err := b.status(ctx, n); err == nil && st.Phase.Finished() {
				ended[n] = st
			}
		}
		return len(ended) == count
	})
	r.took = time.Since(start)
	for _, n := range names {
		st := ended[n]
		if st.Phase == v1.PhaseSucceeded {
			r.succeeded++
		} else if st.Phase == v1.PhaseFailed {
			fmt.Printf("  %s failed: %s\n", n, st.Reason)
		}
		r.givenBack += st.GivenBack
	}
	return r, err
}

// operatorArgs restarts the operator's Deployment with more arguments and waits until
// its new pod is ready.
func (b *bench) operatorArgs(ctx context.Context, args ...string) error {
	deps := b.cl.Client.AppsV1().Deployments("trainyard-system")
	d, err := deps.Get(ctx, "trainyard-operator", metav1.GetOptions{})
	if err != nil {
		return err
	}
	c := d.Spec.Template.Spec.Containers[0]
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/containers/0/args",
		"value": append(slices.Clone(c.Args), args...)}})
	if err != nil {
		return err
	}
	if _, err := deps.Patch(ctx, d.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the operator's arguments: %w", err)
	}
	return poll(3*time.Minute, "the operator restarted with "+strings.Join(args, " "), func() bool {
		d, err := deps.Get(ctx, "trainyard-operator", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1 &&
			d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1
	})
}

// smiMount mounts the stand-in nvidia-smi of b.shared/smi.
var smiMount = corev1.VolumeMount{Name: "shared", MountPath: "/usr/local/bin", SubPath: "smi", ReadOnly: true}
