package jobs

import (
	"fmt"
	"log/slog"
	"os"
)

// FaultEnv names an environment variable for tests only. Set to one of the fault points
// below when the server starts, it makes the server exit with status 137 (as if killed
// with SIGKILL) when it reaches that point of starting or preempting a job, so that a
// test can kill the server inside a crash window that no signal from outside could hit
// reliably. It is read once, by New. Never set it outside tests.
const FaultEnv = "TRAINYARD_TEST_FAULT"

// The fault points of starting a job (values of FaultEnv).
const (
	// FaultAfterRecord: the job's placement is recorded, its supervisor not started yet.
	FaultAfterRecord = "exit-after-record"
	// FaultAfterLaunch: the job's supervisor runs, its pid is not recorded yet.
	FaultAfterLaunch = "exit-after-supervisor-start"
	// FaultAfterPreemptRecord: a running job's preemption is recorded, its supervisor
	// not signalled yet.
	FaultAfterPreemptRecord = "exit-after-preempt-record"
	// FaultAfterResizeRecord: a running elastic job's resize is recorded, its supervisor
	// not told yet.
	FaultAfterResizeRecord = "exit-after-resize-record"
)

// faultFromEnv returns the crash hook that FaultEnv asks for, or nil when it is not set.
func faultFromEnv(log *slog.Logger) (func(point string), error) {
	want := os.Getenv(FaultEnv)
	switch want {
	case "":
		return nil, nil
	case FaultAfterRecord, FaultAfterLaunch, FaultAfterPreemptRecord, FaultAfterResizeRecord:
	default:
		return nil, fmt.Errorf("%s=%q: want %s, %s, %s or %s (it is for tests only; unset it otherwise)",
			FaultEnv, want, FaultAfterRecord, FaultAfterLaunch, FaultAfterPreemptRecord, FaultAfterResizeRecord)
	}
	log.Warn("a test fault is set: the server exits when it reaches it", "fault", want)
	return func(point string) {
		if point == want {
			log.Error("exiting at the test fault", "fault", point)
			os.Exit(137)
		}
	}, nil
}

// fault calls the crash hook, if any, at a fault point.
func (s *Service) fault(point string) {
	if s.crash != nil {
		s.crash(point)
	}
}
