package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// results are what the run measured.
type results struct {
	controlPlane  time.Duration // kube-apiserver and etcd started, CRD installed
	kcmCmd        string        // kube-controller-manager's command line, if it ran
	kcmStarted    time.Duration // exec → its controllers run
	ray           *rayResult    // KubeRay's operator, if it ran
	rayErr        error         // why KubeRay's operator has no figures, if it failed
	operatorStart stretch       // exec → the controller's workers run
	operatorCmd   string
	clientLimits  string
	direct        directResult
	phase1        phase1Result
	pods          podsResult
	phase2        phase2Result
	memory        []memPoint
}

// measureAll starts the control plane (and kube-controller-manager with -kcm), runs the
// peer (and KubeRay's operator with -kuberay), then starts the operator and runs the two
// phases with the pods between them.
func measureAll(ctx context.Context, cfg *config) (res results, err error) {
	progress("control plane: kube-apiserver and etcd from %s", cfg.assets)
	cp, err := startControlPlane(cfg)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, cp.stop()) }()
	res.controlPlane = cp.started
	namespaces := []string{directNamespace, operatorNamespace, rayNamespace}
	if err := cp.createNamespaces(ctx, namespaces...); err != nil {
		return res, err
	}
	m := newMeter(cp)
	if cfg.kcm != "" {
		progress("kube-controller-manager: %s, its default flags", cfg.kcm)
		start := time.Now()
		kcm, err := startKCM(ctx, cfg, cp, namespaces...)
		if err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, kcm.stop()) }()
		res.kcmStarted, res.kcmCmd = time.Since(start), kcm.commandLine(cfg.root)
		m.pids[procKCM] = kcm.pid()
	}
	if res.direct, err = measureDirect(ctx, cfg, cp, m); err != nil {
		return res, fmt.Errorf("peer: %w", err)
	}
	if cfg.kuberay != "" {
		// KubeRay failing (a binary or CRDs of another version) leaves the operator's own
		// figures to measure: the report says why it has none of KubeRay's.
		ray, err := measureKubeRay(ctx, cfg, cp, m)
		if err == nil {
			res.ray = &ray
		} else {
			res.rayErr = err
			progress("KubeRay: %v", err)
		}
		if err := removeKubeRay(ctx, cp); err != nil && res.rayErr == nil {
			return res, fmt.Errorf("KubeRay: %w", err)
		}
	}
	t, err := startTracker(ctx, cp, operatorNamespace, true)
	if err != nil {
		return res, err
	}
	defer t.stop()
	res.clientLimits = operatorClientLimits(cfg)
	var op *operatorProc
	progress("operator: starting")
	if res.operatorStart, err = m.measure(ctx, "operator start", func() error {
		var startErr error
		op, startErr = startOperator(ctx, cfg, cp.kubeconfig)
		return startErr
	}); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, op.stop()) }()
	m.pids[procOperator], res.operatorCmd = op.pid(), op.commandLine(cfg.root)
	res.operatorStart.wall = op.started
	return res, runPhases(ctx, cfg, &res, &operatorRun{cfg: cfg, cp: cp, m: m, t: t}, op)
}

// runPhases runs phase 1, the pods and phase 2, reading the operator's memory after each.
func runPhases(ctx context.Context, cfg *config, res *results, r *operatorRun, op *operatorProc) error {
	mark := func(what string) error {
		p, err := markMemory(op, what)
		res.memory = append(res.memory, p)
		return err
	}
	if err := mark("started, caches in sync, no TrainJobs"); err != nil {
		return err
	}
	var err error
	if res.phase1, err = r.phase1(ctx); err != nil {
		return err
	}
	if err := mark(fmt.Sprintf("after phase 1: %d TrainJobs, %d Services, %d pods", cfg.jobs, cfg.jobs, cfg.jobs*cfg.workers)); err != nil {
		return err
	}
	if res.pods, err = r.startAllPods(ctx); err != nil {
		return err
	}
	if err := mark(fmt.Sprintf("+ the %d pods Running, every TrainJob Running", cfg.jobs*cfg.workers)); err != nil {
		return err
	}
	if res.phase2, err = r.phase2(ctx); err != nil {
		return err
	}
	// Let the last reconciles of attempt 2 (status writes) settle before the last reading.
	time.Sleep(2 * time.Second)
	return mark(fmt.Sprintf("after phase 2: attempt 2's %d Services and %d pods, attempt 1 gone", cfg.jobs, cfg.jobs*cfg.workers))
}
