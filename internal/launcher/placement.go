package launcher

import (
	"fmt"
	"net"
	"strconv"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
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
}

// PlaceLocal places every worker of job on this machine, each with its own GPUs from inv.
// It fails, before anything starts, when the job needs more GPUs than inv has.
func PlaceLocal(job *v1.TrainJob, inv device.Inventory) (Placement, error) {
	workers := job.Spec.WorkerCount()
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
