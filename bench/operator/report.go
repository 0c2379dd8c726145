package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
)

// machine describes where the benchmark ran.
type machine struct {
	cpus       int
	cpu        string // model name
	memory     string // MemTotal
	kernel     string
	trainyard  string // `trainyard version`
	apiserver  string // `kube-apiserver --version`
	etcd       string // `etcd --version`, first line
	kcm        string // `kube-controller-manager --version`
	kuberay    string // KubeRay's version, from its module
	loadBefore string
	loadAfter  string
}

// describeMachine reads the machine's CPUs, kernel, load average and the versions of
// trainyard and the control plane.
func describeMachine(ctx context.Context, cfg *config) machine {
	m := machine{cpus: runtime.NumCPU(), cpu: host.CPU(), kernel: "Linux " + host.Kernel(), memory: host.MemTotalGiB(),
		loadBefore: host.LoadAverage()}
	version := func(bin string, args ...string) string {
		out, err := exec.CommandContext(ctx, bin, args...).Output()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		if err != nil || line == "" {
			return "unknown version"
		}
		return line
	}
	m.trainyard = "operator.Run in this benchmark's own binary, -operator-qps"
	if cfg.operatorQPS == 0 {
		m.trainyard = version(cfg.binary, "version")
	}
	m.apiserver = version(filepath.Join(cfg.assets, "kube-apiserver"), "--version")
	m.etcd = version(filepath.Join(cfg.assets, "etcd"), "--version")
	if cfg.kcm != "" {
		m.kcm = version(cfg.kcm, "--version")
	}
	if cfg.kuberay != "" {
		m.kuberay = moduleVersion(ctx, cfg.kuberay)
	}
	return m
}

// secs writes a duration in seconds, with two decimals below 10 s and one above.
func secs(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// mb writes bytes in MB (10^6 bytes) with one decimal.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// ratio writes a / b with two decimals, in bold.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("**%.2f**", a.Seconds()/b.Seconds())
}

// renderReport writes the Markdown summary.
func renderReport(cfg *config, m machine, res results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## `trainyard operator` against a test API server: %d TrainJobs of %d workers\n\n", cfg.jobs, cfg.workers)
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), %s, %s\n", m.cpus, m.cpu, m.memory, m.kernel)
	fmt.Fprintf(&b, "- load average (1, 5, 15 min): %s before, %s after\n", m.loadBefore, m.loadAfter)
	fmt.Fprintf(&b, "- command: `go run ./bench/operator %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "- control plane (envtest; etcd with --unsafe-no-fsync): %s, %s; started with the TrainJob CRD in %s\n",
		m.apiserver, m.etcd, secs(res.controlPlane))
	if res.kcmCmd != "" {
		fmt.Fprintf(&b, "- kube-controller-manager, default flags: `%s` (%s); its controllers ran %s after exec\n",
			res.kcmCmd, m.kcm, secs(res.kcmStarted))
	} else {
		b.WriteString("- no kube-controller-manager (no garbage collector, no EndpointSlices)\n")
	}
	if res.rayErr != nil {
		fmt.Fprintf(&b, "- KubeRay's operator: failed, so no figures of it: %v\n", res.rayErr)
	}
	if res.ray != nil {
		fmt.Fprintf(&b, "- KubeRay's operator, defaults (QPS 100, burst 200, 1 reconcile worker): `%s` (%s); up %s after exec; "+
			"RayClusters of a head and %d workers in `%s`\n", res.ray.cmd, m.kuberay, secs(res.ray.started), cfg.workers-1, rayImage)
	}
	fmt.Fprintf(&b, "- operator: `%s` (%s), its own process; up (caches in sync, workers running) %s after exec\n",
		res.operatorCmd, m.trainyard, secs(res.operatorStart.wall))
	fmt.Fprintf(&b, "- operator's API client: %s\n", res.clientLimits)
	fmt.Fprintf(&b, "- benchmark's client: no client-side limit (QPS -1); %d goroutines create and update; its watches of namespace %q "+
		"(metadata of Services and pods; whole TrainJobs) time each object's arrival and departure\n\n", cfg.clients, operatorNamespace)
	writeTimes(&b, cfg, res)
	writeKubeRay(&b, cfg, res)
	b.WriteString("### Operator memory\n\n")
	writeMemory(&b, "operator process", res.memory)
	if res.ray != nil {
		writeMemory(&b, "KubeRay's operator process", res.ray.memory)
	}
	peer := []stretch{res.direct.create, res.direct.pods, res.direct.restart, res.direct.remove}
	if res.ray != nil {
		peer = append(peer, res.ray.stretch)
	}
	op := []stretch{res.phase1.stretch, res.pods.stretch, res.phase2.stretch}
	writeCPU(&b, cfg, append(append(append([]stretch(nil), peer...), res.operatorStart), op...))
	writeRequests(&b, cfg, peer, op)
	return b.String()
}

// writeTimes writes the main table: the operator against the peer.
func writeTimes(b *strings.Builder, cfg *config, res results) {
	n, pods := cfg.jobs, cfg.jobs*cfg.workers
	p1, p2, d := res.phase1, res.phase2, res.direct
	b.WriteString("### Time\n\n")
	b.WriteString("| measure | operator | peer: the same objects from the benchmark's client, same API server | operator / peer |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(b, "| **phase 1**: first TrainJob create → every attempt-1 Service and pod exists | %s | %s (%d Services + %d pods created) | %s |\n",
		secs(p1.allExist()), secs(d.create.wall), n, pods, ratio(p1.allExist(), d.create.wall))
	if res.ray != nil {
		fmt.Fprintf(b, "| phase 1 against KubeRay: first RayCluster create → every pod exists | %s | %s (KubeRay's operator, %d RayClusters, %d pods) | %s |\n",
			secs(p1.allExist()), secs(res.ray.pods), n, pods, ratio(p1.allExist(), res.ray.pods))
	}
	fmt.Fprintf(b, "| phase 1: the %d TrainJob creates alone | %s | | |\n", n, secs(p1.creates))
	fmt.Fprintf(b, "| phase 1: → the last pod / the last Service seen | %s / %s | | |\n", secs(p1.pods), secs(p1.services))
	fmt.Fprintf(b, "| phase 1: → every TrainJob's status says attempt 1 was created | %s | | |\n", secs(p1.statusDone))
	fmt.Fprintf(b, "| setup: %d pods set Running (the benchmark as kubelet) | %s | %s | |\n", pods, secs(res.pods.pods), secs(d.pods.wall))
	fmt.Fprintf(b, "| setup: → every TrainJob's status says Running, %d of %d workers ready | %s | | |\n", cfg.workers, cfg.workers, secs(res.pods.running))
	fmt.Fprintf(b, "| **phase 2**: first worker Failed → every attempt-2 Service and pod exists | %s | %s (fail one worker; delete attempt 1's Service and pods; create attempt 2's) | %s |\n",
		secs(p2.allExist()), secs(d.restart.wall), ratio(p2.allExist(), d.restart.wall))
	fmt.Fprintf(b, "| phase 2: the %d pod status updates (Failed) alone | %s | | |\n", n, secs(p2.fails))
	fmt.Fprintf(b, "| phase 2: → the last attempt-2 pod / Service seen | %s / %s | | |\n", secs(p2.pods), secs(p2.services))
	fmt.Fprintf(b, "| phase 2: → attempt 1's Services and %d pods all gone | %s | | |\n", pods, secs(p2.gone))
	fmt.Fprintf(b, "| peer: attempt 2's %d Services and %d pods deleted | | %s | |\n\n", n, pods, secs(d.remove.wall))
}

// writeKubeRay writes what KubeRay's operator took, if it ran.
func writeKubeRay(b *strings.Builder, cfg *config, res results) {
	r := res.ray
	if r == nil {
		return
	}
	fmt.Fprintf(b, "KubeRay: the %d RayCluster creates alone %s; → the last pod %s, the last head Service %s.\n\n",
		cfg.jobs, secs(r.creates), secs(r.pods), secs(r.services))
}

// writeMemory writes a process's memory table.
func writeMemory(b *strings.Builder, who string, points []memPoint) {
	fmt.Fprintf(b, "| %s | VmRSS | VmHWM (peak so far) |\n|---|---:|---:|\n", who)
	for _, p := range points {
		fmt.Fprintf(b, "| %s | %s | %s |\n", p.what, mb(p.mem.RSS), mb(p.mem.HWM))
	}
	b.WriteString("\n")
}

// writeCPU writes the CPU time each process used in each stretch, and the operator's
// (and KubeRay's) per job.
func writeCPU(b *strings.Builder, cfg *config, stretches []stretch) {
	var procs []string
	for _, p := range processes {
		for _, s := range stretches {
			if _, ok := s.cpu[p]; ok {
				procs = append(procs, p)
				break
			}
		}
	}
	fmt.Fprintf(b, "### CPU time by process (%d CPUs)\n\n| stretch | wall |", runtime.NumCPU())
	for _, p := range procs {
		fmt.Fprintf(b, " %s |", p)
	}
	b.WriteString(" all ÷ wall | operator (or KubeRay) per job |\n|---|---:|" + strings.Repeat("---:|", len(procs)+2) + "\n")
	for _, s := range stretches {
		fmt.Fprintf(b, "| %s | %s |", s.name, secs(s.wall))
		var all time.Duration
		for _, p := range procs {
			t, ok := s.cpu[p]
			if !ok {
				b.WriteString(" |")
				continue
			}
			all += t
			fmt.Fprintf(b, " %s |", secs(t))
		}
		fmt.Fprintf(b, " %.2f |", all.Seconds()/s.wall.Seconds())
		if t, ok := s.cpu[procOperator]; ok {
			fmt.Fprintf(b, " %.1f ms |\n", float64(t.Microseconds())/1000/float64(cfg.jobs))
		} else if t, ok := s.cpu[procKubeRay]; ok {
			fmt.Fprintf(b, " %.1f ms |\n", float64(t.Microseconds())/1000/float64(cfg.jobs))
		} else {
			b.WriteString(" |\n")
		}
	}
	b.WriteString("\n")
}

// writeRequests writes the API server's request counts, per stretch, of the requests
// that came at least once per 10 jobs in some stretch.
func writeRequests(b *strings.Builder, cfg *config, peer, op []stretch) {
	all := append(append([]stretch(nil), peer...), op...)
	var rows []requestKey
	seen := map[requestKey]bool{}
	for _, s := range all {
		for _, k := range s.req.sorted() {
			if !seen[k] && s.req[k] >= float64(cfg.jobs)/10 {
				seen[k] = true
				rows = append(rows, k)
			}
		}
	}
	b.WriteString("### API requests by stretch (the API server's `apiserver_request_total`)\n\n| request |")
	for _, s := range all {
		fmt.Fprintf(b, " %s |", s.name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(all)) + "\n")
	for _, k := range rows {
		name := k.verb + " " + k.resource
		if k.conflict {
			name += " (409 Conflict)"
		}
		fmt.Fprintf(b, "| %s |", name)
		for _, s := range all {
			fmt.Fprintf(b, " %.0f |", s.req[k])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	writeRates(b, cfg, op)
}

// writeRates writes what the operator wrote per TrainJob, and how fast, in each phase.
func writeRates(b *strings.Builder, cfg *config, op []stretch) {
	n := float64(cfg.jobs)
	b.WriteString("The operator's writes per TrainJob, and per second of the stretch:\n\n")
	b.WriteString("| stretch | status writes | pod creates | Service creates | Service deletes | pod deletes (collections) | events | pod creates/s | status writes/s |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range op {
		status := s.req.sum("PUT", "trainjobs/status") + s.req.sum("PATCH", "trainjobs/status")
		pods := s.req.sum("POST", "pods")
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f |\n", s.name, status/n, pods/n,
			s.req.sum("POST", "services")/n, s.req.sum("DELETE", "services")/n, s.req.sum("DELETE", "pods")/n,
			s.req.sum("POST", "events")/n, pods/s.wall.Seconds(), status/s.wall.Seconds())
	}
	b.WriteString("\n")
}

// moduleVersion is the main module's path and version that `go version -m` reads from a
// Go binary.
func moduleVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).Output()
	if err != nil {
		return "unknown version"
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" {
			return f[1] + " " + f[2]
		}
	}
	return "unknown version"
}
