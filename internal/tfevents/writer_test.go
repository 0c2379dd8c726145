package tfevents

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "tensorboard")
	w, err := Create(dir)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer w.Close()
	if got := filepath.Dir(w.Path()); got != dir {
		t.Errorf("file in %s, want %s", got, dir)
	}
	name := regexp.MustCompile(fmt.Sprintf(`^events\.out\.tfevents\.\d{10}\.[^/]+\.%d\.\d+$`, os.Getpid()))
	if !name.MatchString(filepath.Base(w.Path())) {
		t.Errorf("file name %q does not match %s", filepath.Base(w.Path()), name)
	}
	// The first event is on disk before any Flush.
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	first, err := (&recordReader{r: bytes.NewReader(b)}).next()
	if err != nil {
		t.Fatalf("reading the first record: %v", err)
	}
	e, err := decodeEvent(first)
	if err != nil {
		t.Fatalf("decoding the first event: %v", err)
	}
	if e.fileVersion != "brain.Event:2" || e.step != 0 || e.summary != nil {
		t.Errorf("first event = %+v, want file_version brain.Event:2 only", e)
	}
	if since := time.Since(time.Unix(0, 0).Add(time.Duration(e.wallTime * 1e9))); since < 0 || since > time.Minute {
		t.Errorf("first event's wall_time %v is not now", e.wallTime)
	}
}

func TestCreateUniqueNames(t *testing.T) {
	dir := t.TempDir()
	// Take the names the next Create would try first, in this second and the next.
	next := fileSeq.Load() + 1
	for _, sec := range []int64{time.Now().Unix(), time.Now().Unix() + 1} {
		taken := fmt.Sprintf("%s%d.%s.%d.%d", FilePrefix, sec, hostname(), os.Getpid(), next)
		if err := os.WriteFile(filepath.Join(dir, taken), []byte("taken"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths := map[string]bool{}
	for range 3 {
		w, err := Create(dir)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		paths[w.Path()] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || len(entries) != 5 {
		t.Errorf("3 Creates made %d names; folder holds %d files, want 5", len(paths), len(entries))
	}
}

func TestCreateError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(file); err == nil || !strings.Contains(err.Error(), "create events file") {
		t.Errorf("Create in a file: error %v, want one saying create events file", err)
	}
}

func TestAddScalarsGolden(t *testing.T) {
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddScalars(7, time.Unix(1, 500_000_000), map[string]float64{"loss": 0.25}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	// The golden record, CRCs from testdata/read_tfevents.py.
	want := unhex(t, "1a00000000000000 129bd82d "+goldenEvents["scalar"].hex+" c9d07b8d")
	if diff := cmp.Diff(want, b[recordEnds(t, b)[0]:]); diff != "" {
		t.Errorf("second record mismatch (-want +got):\n%s", diff)
	}
}

func TestRoundTrip(t *testing.T) {
	manyTags := map[string]float64{}
	for i := range 300 {
		manyTags[fmt.Sprintf("layer%03d/grad_norm", i)] = float64(i) / 7
	}
	cases := map[string]struct {
		points []point
		want   []Scalar // if nil, scalarsOf(points)
	}{
		"several steps": {points: samplePoints},
		"non-finite values": {points: []point{{step: 1, t: base, metrics: map[string]float64{
			"nan": math.NaN(), "+inf": math.Inf(1), "-inf": math.Inf(-1), "zero": 0, "-zero": math.Copysign(0, -1),
		}}}},
		"many tags": {points: []point{{step: 3, t: base, metrics: manyTags}}},
		"large step, step 0 and a repeated step": {points: []point{
			{step: 1 << 40, t: base, metrics: map[string]float64{"a": 1}},
			{step: 0, t: base, metrics: map[string]float64{"a": 2}},
			{step: 0, t: base.Add(time.Second), metrics: map[string]float64{"a": 3}},
		}},
		"float32 rounding, overflow and underflow": {
			points: []point{{step: 1, t: base, metrics: map[string]float64{
				"tenth": 0.1, "huge": 1e300, "-huge": -1e300, "tiny": 1e-50,
			}}},
			want: []Scalar{
				{Step: 1, WallTime: base, Tag: "-huge", Value: math.Inf(-1)},
				{Step: 1, WallTime: base, Tag: "huge", Value: math.Inf(1)},
				{Step: 1, WallTime: base, Tag: "tenth", Value: float64(float32(0.1))},
				{Step: 1, WallTime: base, Tag: "tiny", Value: 0},
			},
		},
		"unicode and punctuation in tags": {points: []point{{step: 1, t: base, metrics: map[string]float64{
			"train/loss": 1, "val accuracy (%)": 2, "λ": 3, "損失": 4,
		}}}},
		"empty metrics write nothing": {
			points: []point{{step: 1, t: base, metrics: nil}, {step: 2, t: base, metrics: map[string]float64{}}},
		},
		"wall time to the microsecond": {points: []point{
			{step: 1, t: time.Date(2025, 3, 1, 12, 0, 0, 123_456_000, time.UTC), metrics: map[string]float64{"a": 1}},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadScalars(writeEvents(t, tc.points))
			if err != nil {
				t.Fatalf("ReadScalars: %v", err)
			}
			want := tc.want
			if want == nil {
				want = scalarsOf(tc.points)
			}
			opts := append(scalarOpts, cmp.Comparer(func(a, b time.Time) bool {
				return a.Sub(b).Abs() < time.Microsecond
			}))
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Errorf("ReadScalars mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddScalarsZeroTimeIsNow(t *testing.T) {
	before := time.Now()
	got, err := ReadScalars(writeEvents(t, []point{{step: 1, metrics: map[string]float64{"a": 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if len(got) != 1 || got[0].WallTime.Before(before.Add(-time.Millisecond)) || got[0].WallTime.After(after.Add(time.Millisecond)) {
		t.Errorf("ReadScalars = %+v, want one scalar written between %v and %v", got, before, after)
	}
}

func TestAddScalarsErrors(t *testing.T) {
	cases := map[string]struct {
		step    int64
		metrics map[string]float64
		want    string
	}{
		"negative step":         {step: -1, metrics: map[string]float64{"a": 1}, want: "step -1 is negative"},
		"empty tag":             {step: 1, metrics: map[string]float64{"a": 1, "": 2}, want: `metric name "" is not a valid tag`},
		"tag that is not UTF-8": {step: 1, metrics: map[string]float64{"caf\xe9": 1}, want: `metric name "caf\xe9" is not a valid tag`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := Create(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			err = w.AddScalars(tc.step, base, tc.metrics)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddScalars error = %v, want one containing %q", err, tc.want)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := ReadScalars(w.Path()); err != nil || len(got) != 0 {
				t.Errorf("ReadScalars = %v, %v; want nothing written", got, err)
			}
		})
	}
}

func TestFlushAndSync(t *testing.T) {
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	steps := func() []int64 {
		got, err := ReadScalars(w.Path())
		if err != nil {
			t.Fatalf("ReadScalars: %v", err)
		}
		var s []int64
		for _, sc := range got {
			s = append(s, sc.Step)
		}
		return s
	}
	add := func(step int64) {
		if err := w.AddScalars(step, base, map[string]float64{"a": 1}); err != nil {
			t.Fatal(err)
		}
	}
	add(1)
	if got := steps(); len(got) != 0 {
		t.Errorf("before Flush the file holds steps %v, want none (buffered)", got)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	add(2)
	if err := w.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if diff := cmp.Diff([]int64{1, 2}, steps()); diff != "" {
		t.Errorf("steps after Flush and Sync (-want +got):\n%s", diff)
	}
}

func TestClosed(t *testing.T) {
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	calls := map[string]func() error{
		"AddScalars": func() error { return w.AddScalars(1, base, map[string]float64{"a": 1}) },
		"Flush":      w.Flush,
		"Sync":       w.Sync,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s after Close: %v, want os.ErrClosed", name, err)
		}
	}
}

func TestConcurrentAddScalars(t *testing.T) {
	const goroutines, perGoroutine = 8, 50
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				step := int64(g*perGoroutine + i)
				metrics := map[string]float64{"a": float64(step), "b": -float64(step)}
				if err := w.AddScalars(step, base, metrics); err != nil {
					t.Errorf("AddScalars(%d): %v", step, err)
				}
				if i%10 == 0 {
					if err := w.Flush(); err != nil {
						t.Errorf("Flush: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadScalars(w.Path())
	if err != nil {
		t.Fatalf("ReadScalars: %v", err)
	}
	// Each event's two values stay together; events may come in any order.
	for i := 0; i+1 < len(got); i += 2 {
		if got[i].Step != got[i+1].Step || got[i].Tag != "a" || got[i+1].Tag != "b" {
			t.Fatalf("scalars %d and %d are %+v and %+v, want a and b of one step", i, i+1, got[i], got[i+1])
		}
	}
	slices.SortStableFunc(got, func(a, b Scalar) int { return int(a.Step - b.Step) })
	var want []point
	for step := range int64(goroutines * perGoroutine) {
		want = append(want, point{step: step, t: base, metrics: map[string]float64{"a": float64(step), "b": -float64(step)}})
	}
	if diff := cmp.Diff(scalarsOf(want), got); diff != "" {
		t.Errorf("ReadScalars mismatch (-want +got):\n%s", diff)
	}
}
