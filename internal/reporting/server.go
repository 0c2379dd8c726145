package reporting

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Limits on what one request may hold.
const (
	MaxRequestBytes = 1 << 20
	MaxMetrics      = 1000
	MaxMetricName   = 256
)

// Request is one line the helper sends.
type Request struct {
	Op         string                     `json:"op"`
	Rank       *int                       `json:"rank"`
	Metrics    map[string]json.RawMessage `json:"metrics"`
	Checkpoint *string                    `json:"checkpoint"`
}

// Report is a decoded, checked report of one rank.
type Report struct {
	Rank       int
	Metrics    map[string]float64
	Checkpoint string // "" when none
	// Listen marks the request a rank sends when it checks for preemption (op "listen"):
	// no metrics, no iteration; the rank can hear the preemption notice.
	Listen bool
}

// Reply is the line the server answers with: ok, iteration and checkpoint (null when
// none) on success; ok false and error otherwise.
type Reply struct {
	OK         bool
	Iteration  int
	Checkpoint string
	Error      string
}

// MarshalJSON writes the reply as the helper's protocol has it.
func (r Reply) MarshalJSON() ([]byte, error) {
	if !r.OK {
		return json.Marshal(map[string]any{"ok": false, "error": r.Error})
	}
	var cp any
	if r.Checkpoint != "" {
		cp = r.Checkpoint
	}
	return json.Marshal(map[string]any{"ok": true, "iteration": r.Iteration, "checkpoint": cp})
}

// Handler acts on a report and says what became of it.
type Handler interface {
	Report(Report) (Reply, error)
}

// Server serves the helper's protocol on a Unix socket: one JSON request per line, one
// JSON reply per line, any number of connections.
type Server struct {
	Path    string
	ln      net.Listener
	handler Handler
	logger  *slog.Logger
	dir     string
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool // Close has begun: accepted connections are closed at once
}

// Listen creates a socket in a new private folder under os.TempDir (socket paths are
// limited to about 100 bytes, so the run folder will not do) and serves it until Close.
func Listen(handler Handler, logger *slog.Logger) (*Server, error) {
	dir, err := os.MkdirTemp("", "trainyard-")
	if err != nil {
		return nil, fmt.Errorf("create report socket folder: %w", err)
	}
	path := filepath.Join(dir, "report.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("listen for reports: %w", err)
	}
	s := &Server{Path: path, ln: ln, handler: handler, logger: logger, dir: dir, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Close stops serving, closes every connection and removes the socket.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(err, os.RemoveAll(s.dir))
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed { // accepted while Close ran: Close did not see it
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), MaxRequestBytes)
	replies := newReplyQueue(c)
	defer replies.close()
	for sc.Scan() {
		if !replies.put(replyLine(s.handle(sc.Bytes()))) {
			return
		}
	}
	if err := sc.Err(); err != nil {
		replies.put(replyLine(Reply{Error: fmt.Sprintf("request longer than %d bytes; report fewer or shorter metrics", MaxRequestBytes)}))
	}
}

// replyLine encodes a reply as one line.
func replyLine(r Reply) []byte {
	data, err := json.Marshal(r)
	if err != nil { // only a Reply's strings go in: not reached
		data, _ = json.Marshal(Reply{Error: "encode the reply: " + err.Error()})
	}
	return append(data, '\n')
}

func (s *Server) handle(line []byte) Reply {
	rep, err := Decode(line)
	if err == nil {
		var reply Reply
		if reply, err = s.handler.Report(rep); err == nil {
			reply.OK = true
			return reply
		}
	}
	return Reply{Error: err.Error()}
}

// Decode parses and checks one request line. Fields it does not know are ignored, as the
// protocol says.
func Decode(line []byte) (Report, error) {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Report{}, fmt.Errorf("bad request: %w", err)
	}
	if req.Op != "report" && req.Op != "listen" {
		return Report{}, fmt.Errorf("bad request: op %q: only \"report\" and \"listen\" are known", req.Op)
	}
	if req.Rank == nil || *req.Rank < 0 {
		return Report{}, errors.New("bad request: rank: required, at least 0")
	}
	if req.Op == "listen" {
		return Report{Rank: *req.Rank, Listen: true}, nil
	}
	metrics, err := decodeMetrics(req.Metrics)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Rank: *req.Rank, Metrics: metrics}
	if req.Checkpoint != nil {
		rep.Checkpoint = *req.Checkpoint
	}
	return rep, nil
}

func decodeMetrics(raw map[string]json.RawMessage) (map[string]float64, error) {
	if len(raw) > MaxMetrics {
		return nil, fmt.Errorf("report: %d metrics; at most %d", len(raw), MaxMetrics)
	}
	out := make(map[string]float64, len(raw))
	for name, v := range raw {
		if name == "" || len(name) > MaxMetricName {
			return nil, fmt.Errorf("report: metric name %q: must be 1 to %d characters", name, MaxMetricName)
		}
		if slices.Contains(fixedColumns, name) {
			return nil, fmt.Errorf("report: metric name %q is one Trainyard records itself; rename the metric", name)
		}
		f, err := metricValue(v)
		if err != nil {
			return nil, fmt.Errorf("report: metric %q: %w", name, err)
		}
		out[name] = f
	}
	return out, nil
}

func metricValue(v json.RawMessage) (float64, error) {
	var f *float64 // nil for null, which is no number
	if err := json.Unmarshal(v, &f); err == nil && f != nil {
		return *f, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, fmt.Errorf("%s is not a number; metrics must be numbers", v)
}
