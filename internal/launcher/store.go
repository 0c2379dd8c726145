package launcher

import (
	"fmt"
	"net"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/peercred"
	"github.com/trainyard/trainyard/internal/tcpstore"
)

// AgentStoreEnv is torch's variable that makes env:// ranks clients of a store the launcher
// hosts (torchrun's agent store), rather than rank 0 hosting one.
const AgentStoreEnv = "TORCHELASTIC_USE_AGENT_STORE"

// hostsStore says whether this launcher hosts the gang's rendezvous store (TCPStore): it
// does when it picks the rendezvous port itself (the whole gang is here) and the job did
// not opt out (see AgentStoreWanted).
func (l *Launcher) hostsStore() bool {
	return l.Placement.MasterPort == 0 && AgentStoreWanted(l.Job)
}

// AgentStoreWanted says whether the job lets the launcher host its store, as torchrun's
// agent does: not when its env sets TORCHELASTIC_USE_AGENT_STORE to anything but True
// (a script that hosts its own TCPStore on MASTER_PORT, say), nor when it sets
// MASTER_ADDR or MASTER_PORT itself (its ranks would not find the launcher's store).
func AgentStoreWanted(job *v1.TrainJob) bool {
	for _, e := range job.Spec.Env {
		switch e.Name {
		case AgentStoreEnv:
			if e.Value != "True" {
				return false
			}
		case "MASTER_ADDR", "MASTER_PORT":
			return false
		}
	}
	return true
}

// storePort makes the store ready for an attempt and returns its port: the first attempt
// starts it on MasterAddr; a later one (a restart, a resize) reuses it, emptied and with the
// previous attempt's connections closed, so its ranks see none of that attempt's keys
// (torch 2.x's env:// clients use no per-attempt prefix under an agent's store).
func (l *Launcher) storePort() (int, error) {
	if l.store != nil {
		l.store.Reset()
		return l.store.Port(), nil
	}
	// Only the job's own user's processes may use it (on the loopback, where that can be
	// known): torch's store has no authentication, and another local user could misdirect
	// the rendezvous.
	s, err := tcpstore.Listen(net.JoinHostPort(l.Placement.MasterAddr, "0"), tcpstore.Options{Logger: l.Logger, Admit: peercred.SameUser})
	if err != nil {
		return 0, fmt.Errorf("host the rendezvous store (set %s=False in the job's env to let rank 0 host it): %w", AgentStoreEnv, err)
	}
	l.store = s
	return s.Port(), nil
}

// closeStore stops the store, when there is one.
func (l *Launcher) closeStore() {
	if l.store != nil {
		l.store.Close()
		l.store = nil
	}
}
