// Package ganglease lets a process inside a server's job lease the resources of a gang of
// its own from the server's scheduler, so that no GPU or core is used outside its
// accounting.
//
// A Ray Train script submitted to `trainyard server` runs as a job of one process (Ray's
// driver); its TorchTrainer.fit() starts the gang ScalingConfig asks for with `trainyard
// run --workers N --gpus-per-worker G [--cpus-per-worker C]`. That nested run finds the
// variables EnvSocket, EnvJob and EnvSecret, which the server gives every job's supervisor,
// and leases its N workers' GPUs, CPU and memory before it looks at the machine's GPUs: it
// sends a Request over the server's Unix socket, and the server answers with a stream of
// Events, one per line: why the lease waits (while it waits; the job's message says the
// same), then the GPUs granted. The connection stays open while the gang runs; the server
// frees the resources when it closes, that is when the nested run ends, however it ends.
// While the gang holds or awaits its lease, the job's own CPU and memory count as lent to
// it (the driver waits on its gang), as a Ray job's driver reserves nothing by default.
package ganglease

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/units"
)

// The environment a server gives each job's supervisor, which passes it on to the job.
const (
	// EnvSocket is the path of the server's lease socket.
	EnvSocket = "TRAINYARD_GPU_LEASE_SOCKET"
	// EnvJob is the ID of the job the process belongs to.
	EnvJob = "TRAINYARD_GPU_LEASE_JOB"
	// EnvSecret proves that the process belongs to that job (see Secret).
	EnvSecret = "TRAINYARD_GPU_LEASE_SECRET"
)

// Path is the HTTP path of the lease on the socket.
const Path = "/v1/lease"

// MaxRequestBytes bounds a request's body.
const MaxRequestBytes = 64 << 10

// Request asks for a gang's resources.
type Request struct {
	// Job is the ID of the job asking (EnvJob).
	Job string `json:"job"`
	// Secret is EnvSecret.
	Secret string `json:"secret"`
	// Workers is the number of workers in the gang, at least 1.
	Workers int `json:"workers"`
	// GPUsPerWorker is the number of whole GPUs each worker needs; 0 for a gang on CPUs.
	GPUsPerWorker int `json:"gpusPerWorker"`
	// MilliCPUPerWorker is the CPU each worker needs, in thousandths of a core.
	MilliCPUPerWorker int64 `json:"milliCPUPerWorker,omitempty"`
	// MemoryBytesPerWorker is the memory each worker needs.
	MemoryBytesPerWorker int64 `json:"memoryBytesPerWorker,omitempty"`
}

// Check says what is wrong with a request's sizes, if anything.
func (r Request) Check() error {
	switch {
	case r.Workers < 1:
		return fmt.Errorf("workers is %d: a gang has at least 1 worker", r.Workers)
	case r.GPUsPerWorker < 0 || r.MilliCPUPerWorker < 0 || r.MemoryBytesPerWorker < 0:
		return fmt.Errorf("gpusPerWorker %d, milliCPUPerWorker %d, memoryBytesPerWorker %d: none may be negative",
			r.GPUsPerWorker, r.MilliCPUPerWorker, r.MemoryBytesPerWorker)
	case r.Workers > 1<<16 || r.GPUsPerWorker > 1<<16:
		return fmt.Errorf("%d workers × %d GPUs is more than any machine has", r.Workers, r.GPUsPerWorker)
	}
	return nil
}

// Event is one line of the server's answer.
type Event struct {
	// Waiting says why the lease waits.
	Waiting string `json:"waiting,omitempty"`
	// GPUs are the GPUs granted, one list per worker, worker 0 first; the last event.
	GPUs [][]int `json:"gpus,omitempty"`
	// Error says why the lease ended without GPUs; the last event.
	Error string `json:"error,omitempty"`
}

// Secret is the job's secret: an HMAC-SHA256 of its ID under the server's key, so that
// the server need not store it and a process cannot lease GPUs in another job's name.
func Secret(key []byte, job string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("trainyard gpu lease\x00" + job))
	return hex.EncodeToString(mac.Sum(nil))
}

// Valid reports whether secret is the job's secret under key.
func Valid(key []byte, job, secret string) bool {
	return hmac.Equal([]byte(Secret(key, job)), []byte(secret))
}

// Visible returns the GPUs as a CUDA_VISIBLE_DEVICES value, worker 0's first.
func Visible(gpus [][]int) string {
	var ids []string
	for _, w := range gpus {
		for _, g := range w {
			ids = append(ids, strconv.Itoa(g))
		}
	}
	return strings.Join(ids, ",")
}

// String says what the request asks for: "2 workers × (1 GPU, 1 CPU)"; "2 workers"
// for a gang that asks for nothing but its workers.
func (r Request) String() string {
	var each []string
	if r.GPUsPerWorker > 0 {
		each = append(each, units.Count(r.GPUsPerWorker, "GPU"))
	}
	if r.MilliCPUPerWorker > 0 {
		each = append(each, units.Cores(r.MilliCPUPerWorker)+" CPU")
	}
	if r.MemoryBytesPerWorker > 0 {
		each = append(each, units.BytesIEC(r.MemoryBytesPerWorker)+" memory")
	}
	if len(each) == 0 {
		return units.Count(r.Workers, "worker")
	}
	return fmt.Sprintf("%s × (%s)", units.Count(r.Workers, "worker"), strings.Join(each, ", "))
}
