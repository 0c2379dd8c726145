package reporting

import (
	"bufio"
	"net"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// BenchmarkSessionReport measures rank 0's report without a checkpoint: the results files
// and TensorBoard, as the server's handler.
func BenchmarkSessionReport(b *testing.B) {
	dir := b.TempDir()
	s, err := Start(&v1.TrainJob{}, rootOf(b, dir), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AttemptEnv(1); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if _, err := s.Report(Report{Rank: 0, Metrics: map[string]float64{"loss": 1 / float64(i+1), "step": float64(i)}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServerRoundTrip measures one request and its reply over the socket, with rank
// 1's report (no files written), as the helper sends it.
func BenchmarkServerRoundTrip(b *testing.B) {
	dir := b.TempDir()
	s, err := Start(&v1.TrainJob{}, rootOf(b, dir), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	env, err := s.AttemptEnv(1)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.Dial("unix", env["TRAINYARD_REPORT_SOCKET"])
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := &client{conn: conn, r: bufio.NewReader(conn)}
	line := `{"op": "report", "rank": 1, "metrics": {"loss": 0.25, "step": 100}, "checkpoint": null}`
	for b.Loop() {
		if _, err := c.roundTrip(line); err != nil {
			b.Fatal(err)
		}
	}
}
