package launcher

import (
	"fmt"
	"net"
	"runtime"
	"strconv"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/units"
)

// LocalAddr is the rendezvous address when the whole gang runs on this machine.
const LocalAddr = "127.0.0.1"

// Slot is one worker that runs on this machine, with the GPUs it was given.
type Slot struct {
	Worker int
	GPUs   []device.GPU
}

// Placement says which of a job's workers run on this machine and where they meet.
type Placement struct {
	Slots      []Slot
	MasterAddr string
	// MasterPort is the rendezvous port; 0 picks a free port on MasterAddr for each
	// attempt, which only works when rank 0 runs here.
	MasterPort int
	// NodePerWorker says that each worker of the gang runs on a machine of its own (a pod
	// on Kubernetes), which is then torchrun's node: NODE_RANK is the worker's index and
	// LOCAL_RANK counts its own processes. Without it, all the workers in Slots share this
	// machine as one node: LOCAL_RANK counts the processes of all of them, and each sees
	// the GPUs of all of them.
	NodePerWorker bool
	// MilliCPU is the CPU the Slots' workers have here, in millicores, when it is less
	// than this machine's cores: on Kubernetes the worker container's request. 0: the
	// machine's cores. Their processes share it as OMP_NUM_THREADS when the job names
	// no CPU of its own.
	MilliCPU int64
	// StoreHosted says that the gang's rendezvous store is already served at MasterAddr and
	// MasterPort by a launcher (worker 0's on Kubernetes, see package podworker): every rank,
	// rank 0 too, is its client (TORCHELASTIC_USE_AGENT_STORE=True).
	StoreHosted bool
}

// PlaceLocal places every worker of job on this machine, each with its own GPUs from inv.
// It fails, before anything starts, when the job needs more GPUs than inv has.
func PlaceLocal(job *v1.TrainJob, inv device.Inventory) (Placement, error) {
	workers := job.Spec.WorkerCount()
	if err := fitsCPUs(job, runtime.NumCPU()); err != nil {
		return Placement{}, err
	}
	sets, err := device.Assign(inv, workers, int(job.Spec.Resources.GPU))
	if err != nil {
		return Placement{}, err
	}
	p := Placement{MasterAddr: LocalAddr}
	for w := range workers {
		p.Slots = append(p.Slots, Slot{Worker: w, GPUs: sets[w]})
	}
	return p, nil
}

// fitsCPUs refuses a gang whose workers ask for more cores in all than this machine's
// cores, as the job server refuses a job that can never fit.
func fitsCPUs(job *v1.TrainJob, cores int) error {
	cpu := job.Spec.Resources.CPU
	if cpu == nil {
		return nil
	}
	workers := int64(job.Spec.WorkerCount())
	if need := workers * cpu.MilliValue(); need > int64(cores)*1000 {
		return fmt.Errorf("--cpus-per-worker %s x %d worker(s) asks for %s cores; this machine has %d: "+
			"ask for at most %s per worker", cpu, workers, units.Cores(need), cores, units.Cores(int64(cores)*1000/workers))
	}
	return nil
}

// freePort asks the kernel for a port that is free on addr now.
func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free rendezvous port on %s: %w", addr, err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("find a free rendezvous port: %w", err)
	}
	return strconv.Atoi(port)
}
