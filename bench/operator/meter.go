package main

import (
	"context"
	"os"
	"time"
)

// Processes whose CPU time the benchmark follows.
const (
	procAPIServer = "kube-apiserver"
	procEtcd      = "etcd"
	procKCM       = "kube-controller-manager"
	procOperator  = "operator"
	procKubeRay   = "KubeRay"
	procBench     = "benchmark"
)

// processes are the columns of the CPU table, in order.
var processes = []string{procAPIServer, procEtcd, procKCM, procOperator, procKubeRay, procBench}

// meter reads, at the edges of each stretch of the run, the CPU time of the control
// plane, the operators and the benchmark, and the API server's request counts.
type meter struct {
	cp   *controlPlane
	pids map[string]int // by process name (processes), while it runs
}

// newMeter is a meter of the control plane and this process.
func newMeter(cp *controlPlane) *meter {
	return &meter{cp: cp, pids: map[string]int{procAPIServer: cp.apiserver, procEtcd: cp.etcd, procBench: os.Getpid()}}
}

// snapshot is what the meter read at one moment.
type snapshot struct {
	at  time.Time
	cpu map[string]time.Duration
	req requestCounts
}

// stretch is what happened between two snapshots.
type stretch struct {
	name string
	wall time.Duration
	cpu  map[string]time.Duration
	req  requestCounts
}

func (m *meter) read(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), cpu: map[string]time.Duration{}}
	for name, pid := range m.pids {
		if pid == 0 {
			continue
		}
		if t, err := cpuTime(pid); err == nil {
			s.cpu[name] = t
		}
	}
	var err error
	s.req, err = m.cp.requests(ctx)
	return s, err
}

// between is the stretch from a to b.
func between(name string, a, b snapshot) stretch {
	st := stretch{name: name, wall: b.at.Sub(a.at), cpu: map[string]time.Duration{}, req: b.req.minus(a.req)}
	for p, t := range b.cpu {
		st.cpu[p] = t - a.cpu[p] // a process started in between counts from zero
	}
	return st
}

// measure runs fn between two snapshots and returns the stretch.
func (m *meter) measure(ctx context.Context, name string, fn func() error) (stretch, error) {
	a, err := m.read(ctx)
	if err != nil {
		return stretch{}, err
	}
	if err := fn(); err != nil {
		return stretch{}, err
	}
	b, err := m.read(ctx)
	if err != nil {
		return stretch{}, err
	}
	return between(name, a, b), nil
}
