package tfevents

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// base is the wall time of the test events. Whole quarter seconds are exact in float64,
// so wall times round-trip exactly.
var base = time.Unix(1_700_000_000, 0)

// point is one AddScalars call.
type point struct {
	step    int64
	t       time.Time
	metrics map[string]float64
}

// samplePoints are a few steps with several metrics each.
var samplePoints = []point{
	{step: 0, t: base, metrics: map[string]float64{"loss": 2.5, "lr": 0.1}},
	{step: 10, t: base.Add(250 * time.Millisecond), metrics: map[string]float64{"loss": 1.25, "lr": 0.1}},
	{step: 20, t: base.Add(time.Second), metrics: map[string]float64{"loss": 0.5}},
}

// scalarOpts compares Scalars, equating NaNs.
var scalarOpts = cmp.Options{cmpopts.EquateNaNs()}

// writeEvents writes points to a new events file in a temporary folder and returns the
// file's path.
func writeEvents(t *testing.T, points []point) string {
	t.Helper()
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, p := range points {
		if err := w.AddScalars(p.step, p.t, p.metrics); err != nil {
			t.Fatalf("AddScalars(%d): %v", p.step, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return w.Path()
}

// scalarsOf returns what ReadScalars should return for a file holding points: values as
// float32, sorted by tag within a step.
func scalarsOf(points []point) []Scalar {
	var out []Scalar
	for _, p := range points {
		var step []Scalar
		for tag, v := range p.metrics {
			step = append(step, Scalar{Step: p.step, WallTime: p.t, Tag: tag, Value: float64(float32(v))})
		}
		slices.SortFunc(step, func(a, b Scalar) int { return strings.Compare(a.Tag, b.Tag) })
		out = append(out, step...)
	}
	return out
}

// recordEnds returns the offset just past each record in b, read from the length fields.
func recordEnds(t *testing.T, b []byte) []int {
	t.Helper()
	var ends []int
	for off := 0; off < len(b); {
		off += headerSize + int(binary.LittleEndian.Uint64(b[off:])) + footerSize
		ends = append(ends, off)
	}
	if ends[len(ends)-1] != len(b) {
		t.Fatalf("records end at %d, file at %d", ends[len(ends)-1], len(b))
	}
	return ends
}
