package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"

	"github.com/trainyard/trainyard/internal/tcpstore"
)

// With -bare, every plain round also starts the ranks with no launcher at all: this
// program, run again as bareCommand, opens a rendezvous store (Trainyard's, in process),
// then starts one `python script` per rank with the variables torchrun's ranks get and
// waits for them. Nothing runs before the ranks but a store that is already listening, so
// its launch to first step is the floor any launcher can reach with cold Pythons: the
// ranks' own start (importing torch, the script's set-up, the first step). A launcher's
// time over it is what the launcher adds.

// bareCommand is the first argument that makes this program the bare launcher.
const bareCommand = "-bare-ranks"

// bareLauncher starts the ranks itself; plain runs only.
var bareLauncher = launcher{name: "bare", argv: bareArgv, rank0: trainyardRank0, plainOnly: true}

// bareArgv runs this program as the bare launcher of the script.
func bareArgv(cfg *config, _, _ string, _ int, script []string) []string {
	self := cfg.self
	if self == "" {
		self = "<this program>"
	}
	return append([]string{self, bareCommand, cfg.python}, script...)
}

// runBare is the bare launcher: argv is the Python and the script with its arguments.
// The ranks' lines go to stdout, prefixed, and their stderr to stderr. It returns the
// exit code: 0 when every rank exited 0.
func runBare(argv []string, stdout, stderr io.Writer) int {
	if len(argv) < 2 {
		fmt.Fprintf(stderr, "usage: launch %s PYTHON SCRIPT [ARG...]\n", bareCommand)
		return 2
	}
	store, err := tcpstore.Listen("127.0.0.1:0", tcpstore.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "bench/launch bare:", err)
		return 1
	}
	defer store.Close()
	var (
		out   = &lockedWriter{w: stdout}
		procs []*exec.Cmd
		wg    sync.WaitGroup
	)
	for rank := range ranks {
		cmd, lines, err := startBareRank(argv, rank, store.Port(), stderr)
		if err != nil {
			fmt.Fprintln(stderr, "bench/launch bare:", err)
			killAll(procs)
			return 1
		}
		procs = append(procs, cmd)
		wg.Add(1)
		go func() { defer wg.Done(); prefixLines(lines, out, rank, cmd.Process.Pid) }()
	}
	wg.Wait() // the ends of their stdout, before Wait closes the pipes
	code := 0
	for rank, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(stderr, "bench/launch bare: rank %d: %v\n", rank, err)
			code = 1
		}
	}
	return code
}

// startBareRank starts one rank with torchrun's variables, its store hosted by the
// launcher (TORCHELASTIC_USE_AGENT_STORE, as trainyard's and torchrun's ranks have it),
// and OMP_NUM_THREADS the rank's share of the cores, as trainyard gives it.
func startBareRank(argv []string, rank, port int, stderr io.Writer) (*exec.Cmd, io.ReadCloser, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	n := strconv.Itoa
	cmd.Env = append(os.Environ(), "RANK="+n(rank), "LOCAL_RANK="+n(rank), "GROUP_RANK=0",
		"WORLD_SIZE="+n(ranks), "LOCAL_WORLD_SIZE="+n(ranks), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+n(port),
		"TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_MAX_RESTARTS=0",
		"TORCHELASTIC_RUN_ID=bare", "OMP_NUM_THREADS="+n(max(1, runtime.NumCPU()/ranks)))
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start rank %d: %w", rank, err)
	}
	return cmd, stdout, nil
}

// prefixLines copies r to w line by line, each prefixed "[rank N pid P] " as trainyard's
// console does, so that rank 0's lines are told apart the same way.
func prefixLines(r io.Reader, w io.Writer, rank, pid int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(w, "[rank %d pid %d] %s\n", rank, pid, sc.Text())
	}
	_, _ = io.Copy(io.Discard, r) // a line past the buffer: keep the rank from blocking
}

// killAll kills the ranks started so far.
func killAll(procs []*exec.Cmd) {
	for _, cmd := range procs {
		_ = cmd.Process.Kill()
	}
}

// lockedWriter serialises the ranks' lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
