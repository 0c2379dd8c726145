package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// queueWaitBuckets are the upper bounds, in seconds, of trainyard_queue_wait_seconds.
var queueWaitBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400}

// metrics answers GET /metrics in the Prometheus text format (version 0.0.4). The values
// are computed from the jobs the store holds at each scrape, so deleting jobs lowers the
// restart count and the queue-wait histogram, which Prometheus reads as a counter reset.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	all, err := s.cfg.Jobs.List(store.Filter{})
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	var b strings.Builder
	writeJobCounts(&b, all)
	var running []*store.Job
	for _, j := range all {
		if j.Status == store.Running {
			running = append(running, j)
		}
	}
	gauge(&b, "trainyard_gpus_total", "GPUs this server gives to jobs.", float64(len(gpuIndices(s.cfg.Node.Resources.GPUs))))
	gauge(&b, "trainyard_gpus_allocated", "GPUs that running jobs hold.", float64(s.allocated(running).gpus))
	fmt.Fprintf(&b, "# HELP trainyard_job_restarts_total Restarts of the gang: attempts after the first, over the jobs with a run record.\n"+
		"# TYPE trainyard_job_restarts_total counter\ntrainyard_job_restarts_total %d\n", s.restartsTotal(all))
	writeQueueWait(&b, all)
	s.writeGPUUse(r.Context(), &b, running)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, b.String())
}

// writeJobCounts writes the trainyard_jobs gauge: jobs by status, every status present.
func writeJobCounts(b *strings.Builder, all []*store.Job) {
	counts := map[store.Status]int{}
	for _, j := range all {
		counts[j.Status]++
	}
	b.WriteString("# HELP trainyard_jobs Jobs the server holds, by status.\n# TYPE trainyard_jobs gauge\n")
	for _, st := range []store.Status{store.Pending, store.Running, store.Stopped, store.Succeeded, store.Failed} {
		fmt.Fprintf(b, "trainyard_jobs{status=%q} %d\n", st, counts[st])
	}
}

// gauge writes a gauge without labels.
func gauge(b *strings.Builder, name, help string, v float64) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, formatFloat(v))
}

// writeQueueWait writes the histogram of the time started jobs waited, from submission
// to start.
func writeQueueWait(b *strings.Builder, all []*store.Job) {
	counts := make([]int, len(queueWaitBuckets))
	total, sum := 0, 0.0
	for _, j := range all {
		if j.StartedAt == nil {
			continue
		}
		wait := max(0, j.StartedAt.Sub(j.SubmittedAt).Seconds())
		total++
		sum += wait
		for i, le := range queueWaitBuckets {
			if wait <= le {
				counts[i]++
			}
		}
	}
	const name = "trainyard_queue_wait_seconds"
	fmt.Fprintf(b, "# HELP %s Time started jobs waited from submission to start.\n# TYPE %s histogram\n", name, name)
	for i, le := range queueWaitBuckets {
		fmt.Fprintf(b, "%s_bucket{le=%q} %d\n", name, formatFloat(le), counts[i])
	}
	fmt.Fprintf(b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, total, name, formatFloat(sum), name, total)
}

// gpuScrapeTimeout bounds the nvidia-smi call of a scrape.
const gpuScrapeTimeout = 5 * time.Second

// writeGPUUse writes each GPU's utilization and memory now (when the server can measure
// them), labelled with the job and worker that hold it ("" when free): the per-rank
// figures of `trainyard top job NAME` for Prometheus.
func (s *Server) writeGPUUse(ctx context.Context, b *strings.Builder, running []*store.Job) {
	use := s.cfg.Node.Utilization
	if use == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, gpuScrapeTimeout)
	defer cancel()
	util, err := use(ctx)
	if err != nil {
		s.log.Warn("metrics: measure the GPUs", "err", err)
		return
	}
	type holder struct{ job, worker string }
	held := map[int]holder{}
	for _, j := range running {
		hold := func(gpus [][]int) {
			for w, list := range gpus {
				for _, g := range list {
					held[g] = holder{j.ID, strconv.Itoa(w)}
				}
			}
		}
		hold(j.GPUs)
		if j.Gang != nil {
			hold(j.Gang.GPUs)
		}
	}
	series := []struct {
		name, help string
		value      func(GPUUtilization) float64
	}{
		{"trainyard_gpu_utilization_percent", "Share of the last sample period each GPU was busy (nvidia-smi), by the job and worker that hold it.",
			func(u GPUUtilization) float64 { return u.Percent }},
		{"trainyard_gpu_memory_used_bytes", "Memory used on each GPU (nvidia-smi), by the job and worker that hold it.",
			func(u GPUUtilization) float64 { return float64(u.MemoryUsedBytes) }},
		{"trainyard_gpu_memory_total_bytes", "Memory of each GPU.",
			func(u GPUUtilization) float64 { return float64(u.MemoryTotalBytes) }},
	}
	for _, m := range series {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.help, m.name)
		for _, u := range util {
			h := held[u.Index]
			fmt.Fprintf(b, "%s{gpu=\"%d\",job=\"%s\",worker=\"%s\"} %s\n", m.name, u.Index, labelValue(h.job), h.worker,
				formatFloat(m.value(u)))
		}
	}
}

// labelValue escapes a Prometheus label value: backslash, double quote and newline.
func labelValue(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// formatFloat writes a sample value as Prometheus reads it.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// restartCount is a job's restarts as last read from its run record, at the job's version.
type restartCount struct {
	version uint64
	n       int
}

// restartsTotal sums attempts-1 over the jobs with a run record. The counts of ended
// jobs, whose records no longer change, are kept between scrapes.
func (s *Server) restartsTotal(all []*store.Job) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(all))
	total := 0
	for _, j := range all {
		seen[j.ID] = true
		if c, ok := s.restarts[j.ID]; ok && c.version == j.Version {
			total += c.n
			continue
		}
		if j.Status == store.Pending || j.RunDir == "" {
			continue
		}
		rec, err := rundir.ReadRecord(j.RunDir)
		if err != nil {
			continue
		}
		n := max(0, len(rec.Attempts)-1)
		total += n
		if j.Status.Terminal() {
			s.restarts[j.ID] = restartCount{version: j.Version, n: n}
		}
	}
	for id := range s.restarts {
		if !seen[id] {
			delete(s.restarts, id)
		}
	}
	return total
}
