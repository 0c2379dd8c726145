package workload

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The worker container declares the gang's port, and an attempt made after restarts
// tells the gang how many the run has had, so that restarts in place count on from there,
// and which workers it went on without in place.
func TestRenderGang(t *testing.T) {
	j := baseJob()
	j.Status.Restarts, j.Status.Disruptions, j.Status.DroppedWorkers = 3, 1, []int32{2, 3}
	a, err := Render(j, 4, Options{Image: "trainyard:test"})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Template.Spec.Containers[0]
	env := envMap(c.Env)
	if env[EnvRestarts] != "3" || env[EnvDisruptions] != "1" || env[EnvDroppedWorkers] != "2,3" {
		t.Errorf("env %v: want %s=3, %s=1 and %s=2,3", env, EnvRestarts, EnvDisruptions, EnvDroppedWorkers)
	}
	if !hasPort(c.Ports, "gang", GangPort) {
		t.Errorf("ports %+v lack gang %d", c.Ports, GangPort)
	}

	a, err = Render(baseJob(), 1, Options{Image: "trainyard:test"})
	if err != nil {
		t.Fatal(err)
	}
	if env := envMap(a.Template.Spec.Containers[0].Env); env[EnvRestarts] != "" || env[EnvDisruptions] != "" || env[EnvDroppedWorkers] != "" {
		t.Errorf("the first attempt's env %v: want no restarts", env)
	}
}

func hasPort(ports []corev1.ContainerPort, name string, port int32) bool {
	for _, p := range ports {
		if p.Name == name && p.ContainerPort == port {
			return true
		}
	}
	return false
}

// A long last restart's reason is shortened before the worker's own reason.
func TestSummaryEncodeLastRestart(t *testing.T) {
	s := Summary{Outcome: "failed", Reason: "rank 1 failed", LastRestart: strings.Repeat("y", 5000), Attempt: 3}
	data := s.Encode()
	if len(data) > TerminationLogMax {
		t.Fatalf("encoded %d bytes, more than %d", len(data), TerminationLogMax)
	}
	back, err := DecodeSummary(string(data))
	if err != nil || back.Reason != "rank 1 failed" || len(back.LastRestart) != 512 || back.Attempt != 3 {
		t.Errorf("round trip: reason %q, last restart of %d bytes, attempt %d, %v", back.Reason, len(back.LastRestart), back.Attempt, err)
	}
}
