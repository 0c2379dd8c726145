package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/trainyard/trainyard/client"
)

// HistorySamples is how many samples of the machine the dashboard keeps: an hour at
// the default interval.
const HistorySamples = 720

// SampleInterval is how often Sample reads the machine by default.
const SampleInterval = 5 * time.Second

// sample is the machine at one moment.
type sample struct {
	Time time.Time               `json:"time"`
	GPUs []client.GPUUtilization `json:"gpus"`
	// GPUsAllocated, MilliCPUAllocated and MemoryAllocated are what jobs hold.
	GPUsAllocated     int64 `json:"gpusAllocated"`
	MilliCPUAllocated int64 `json:"milliCPUAllocated"`
	MemoryAllocated   int64 `json:"memoryAllocated"`
}

// history is a ring of the last samples.
type history struct {
	mu   sync.Mutex
	ring []sample
	next int
	full bool
}

func newHistory(n int) *history { return &history{ring: make([]sample, n)} }

func (h *history) add(s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	h.full = h.full || h.next == 0
}

// all returns the samples, oldest first.
func (h *history) all() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.full {
		return slices.Clone(h.ring[:h.next])
	}
	return append(slices.Clone(h.ring[h.next:]), h.ring[:h.next]...)
}

// Sample reads the machine every interval (SampleInterval when 0) into the dashboard's
// history, which the machine page charts, until ctx ends.
func (h *Handler) Sample(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = SampleInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := h.cfg.Backend.Node(ctx); err == nil {
			h.samples.add(sample{Time: h.cfg.Now(), GPUs: n.GPUs.Utilization, GPUsAllocated: n.GPUs.Allocated,
				MilliCPUAllocated: n.MilliCPU.Allocated, MemoryAllocated: n.MemoryBytes.Allocated})
		} else if ctx.Err() == nil {
			h.log.Debug("dashboard: sample the machine", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gpuRow is one GPU of the machine page.
type gpuRow struct {
	Index   int
	Use     *client.GPUUtilization
	Holders []holder
}

// holder is a job (or its gang) holding a GPU, with the worker that uses it.
type holder struct {
	Label string // "job (worker 1)", "job's gang (worker 0)"
	JobID string
}

// machine is the machine page's data.
type machine struct {
	Node client.Node
	GPUs []gpuRow
}

func (h *Handler) machinePage(w http.ResponseWriter, r *http.Request, session string) {
	n, err := h.cfg.Backend.Node(r.Context())
	if err != nil {
		h.backendError(w, r, err)
		return
	}
	running, err := h.cfg.Backend.List(r.Context(), client.JobStatus("RUNNING"))
	if err != nil {
		h.backendError(w, r, err)
		return
	}
	m := machine{Node: n}
	holders := map[int][]holder{}
	hold := func(gpus [][]int, who string, id string) {
		for worker, list := range gpus {
			for _, g := range list {
				holders[g] = append(holders[g], holder{Label: fmt.Sprintf("%s (worker %d)", who, worker), JobID: id})
			}
		}
	}
	for _, j := range running {
		name := j.ID
		if j.Name != "" {
			name = j.Name
		}
		hold(j.GPUs, name, j.ID)
		if j.Gang != nil {
			hold(j.Gang.GPUs, name+"'s gang", j.ID)
		}
	}
	for _, idx := range n.GPUs.Indices {
		row := gpuRow{Index: idx, Holders: holders[idx]}
		for i := range n.GPUs.Utilization {
			if n.GPUs.Utilization[i].Index == idx {
				row.Use = &n.GPUs.Utilization[i]
			}
		}
		m.GPUs = append(m.GPUs, row)
	}
	h.render(w, http.StatusOK, "machine.html", page{Title: "Machine", CSRF: h.sessions.csrf(session), Data: m})
}

func (h *Handler) samplesJSON(w http.ResponseWriter, _ *http.Request, _ string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(h.samples.all())
}

// mib writes bytes in MiB.
func mib(b int64) string { return strconv.FormatInt(b>>20, 10) + " MiB" }
