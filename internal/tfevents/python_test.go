package tfevents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// python is the interpreter that runs testdata/read_tfevents.py.
const python = "/usr/bin/python3"

// pyScalar is one scalar printed by testdata/read_tfevents.py.
type pyScalar struct {
	Step     int64
	WallTime float64
	Tag      string
	Value    float64
}

// pyLine is the JSON line that testdata/read_tfevents.py prints for a scalar.
type pyLine struct {
	Step     int64     `json:"step"`
	WallTime jsonFloat `json:"wall_time"`
	Tag      string    `json:"tag"`
	Value    jsonFloat `json:"value"`
}

// jsonFloat is a JSON number, or one of the strings "NaN", "Infinity" and "-Infinity".
type jsonFloat float64

// UnmarshalJSON reads a number or a non-finite value's name.
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return json.Unmarshal(b, (*float64)(f))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("value %q: %w", s, err)
	}
	*f = jsonFloat(v)
	return nil
}

// readWithPython returns what testdata/read_tfevents.py reads from the file at path.
func readWithPython(t *testing.T, path string) ([]pyScalar, error) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("the independent reader needs %s: %v", python, err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(python, "testdata/read_tfevents.py", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("read_tfevents.py: %w: %s", err, stderr.Bytes())
	}
	var got []pyScalar
	lines := bufio.NewScanner(bytes.NewReader(out))
	for lines.Scan() {
		var l pyLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatalf("read_tfevents.py printed %q: %v", lines.Text(), err)
		}
		got = append(got, pyScalar{Step: l.Step, WallTime: float64(l.WallTime), Tag: l.Tag, Value: float64(l.Value)})
	}
	return got, nil
}

// pyScalarsOf returns what read_tfevents.py should print for a file holding points.
func pyScalarsOf(points []point) []pyScalar {
	var out []pyScalar
	for _, s := range scalarsOf(points) {
		// Exact for the whole quarter seconds of the test points.
		wall := float64(s.WallTime.Unix()) + float64(s.WallTime.Nanosecond())/1e9
		out = append(out, pyScalar{Step: s.Step, WallTime: wall, Tag: s.Tag, Value: s.Value})
	}
	return out
}

func TestIndependentReader(t *testing.T) {
	manyTags := map[string]float64{}
	for i := range 100 {
		manyTags[fmt.Sprintf("tag%02d", i)] = math.Pi * float64(i)
	}
	points := []point{
		{step: 0, t: base, metrics: map[string]float64{"loss": 2.5, "lr": 1e-4, "zero": 0}},
		{step: 1, t: base.Add(250 * time.Millisecond), metrics: map[string]float64{
			"nan": math.NaN(), "+inf": math.Inf(1), "-inf": math.Inf(-1), "huge": 1e300,
		}},
		{step: 1 << 40, t: base.Add(time.Hour), metrics: map[string]float64{"λ/損失": -0.1, "third": 1.0 / 3}},
		{step: 12345, t: base.Add(2 * time.Hour), metrics: manyTags},
	}
	got, err := readWithPython(t, writeEvents(t, points))
	if err != nil {
		t.Fatal(err)
	}
	// Values match exactly at float32 precision; wall times are whole quarter seconds.
	if diff := cmp.Diff(pyScalarsOf(points), got, scalarOpts); diff != "" {
		t.Errorf("read_tfevents.py mismatch (-want +got):\n%s", diff)
	}
}

func TestIndependentReaderFindsCorruption(t *testing.T) {
	path := writeEvents(t, samplePoints)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ends := recordEnds(t, b)
	cases := map[string][]byte{
		"data byte flipped":   flip(b, ends[1]+headerSize+2),
		"length byte flipped": flip(b, ends[0]),
		"cut in a record":     b[:len(b)-1],
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := readWithPython(t, path); err == nil {
				t.Errorf("read_tfevents.py read %d scalars, want an error", len(got))
			}
		})
	}
}

// flip returns a copy of b with the byte at off inverted.
func flip(b []byte, off int) []byte {
	c := bytes.Clone(b)
	c[off] ^= 0xff
	return c
}
