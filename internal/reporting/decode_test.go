package reporting

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// manyMetrics returns a request line with n metrics m0, m1, ...
func manyMetrics(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"m%d":%d`, i, i)
	}
	return `{"op":"report","rank":0,"metrics":{` + strings.Join(parts, ",") + `}}`
}

func TestDecode(t *testing.T) {
	long := strings.Repeat("x", MaxMetricName)
	cases := map[string]struct {
		line    string
		want    Report
		wantErr string
	}{
		"valid": {
			line: `{"op":"report","rank":0,"metrics":{"loss":0.25,"step":100},"checkpoint":"/runs/a/ckpt"}`,
			want: Report{Rank: 0, Metrics: map[string]float64{"loss": 0.25, "step": 100}, Checkpoint: "/runs/a/ckpt"},
		},
		"null checkpoint": {
			line: `{"op":"report","rank":3,"metrics":{"loss":-1e-3},"checkpoint":null}`,
			want: Report{Rank: 3, Metrics: map[string]float64{"loss": -1e-3}},
		},
		"no metrics": {
			line: `{"op":"report","rank":1}`,
			want: Report{Rank: 1, Metrics: map[string]float64{}},
		},
		"non-finite strings": {
			line: `{"op":"report","rank":0,"metrics":{"a":"NaN","b":"Infinity","c":"-Infinity"},"checkpoint":null}`,
			want: Report{Metrics: map[string]float64{"a": math.NaN(), "b": math.Inf(1), "c": math.Inf(-1)}},
		},
		"longest metric name": {
			line: `{"op":"report","rank":0,"metrics":{"` + long + `":1}}`,
			want: Report{Metrics: map[string]float64{long: 1}},
		},
		"most metrics": {
			line: manyMetrics(MaxMetrics),
			want: Report{Metrics: func() map[string]float64 {
				m := map[string]float64{}
				for i := range MaxMetrics {
					m["m"+strconv.Itoa(i)] = float64(i)
				}
				return m
			}()},
		},
		// The protocol: "Both sides ignore fields they do not know."
		"unknown field": {
			line: `{"op":"report","rank":0,"metrics":{"loss":1},"step":7,"extra":{"x":[1]}}`,
			want: Report{Metrics: map[string]float64{"loss": 1}},
		},
		"unknown op": {
			line:    `{"op":"commit","rank":0,"metrics":{}}`,
			wantErr: `bad request: op "commit": only "report" and "listen" are known`,
		},
		"no op": {
			line:    `{"rank":0,"metrics":{}}`,
			wantErr: `bad request: op "": only "report" and "listen" are known`,
		},
		"listen": {
			line: `{"op":"listen","rank":3}`,
			want: Report{Rank: 3, Listen: true},
		},
		"missing rank": {
			line:    `{"op":"report","metrics":{"loss":1}}`,
			wantErr: `bad request: rank: required, at least 0`,
		},
		"null rank": {
			line:    `{"op":"report","rank":null,"metrics":{"loss":1}}`,
			wantErr: `bad request: rank: required, at least 0`,
		},
		"negative rank": {
			line:    `{"op":"report","rank":-1,"metrics":{"loss":1}}`,
			wantErr: `bad request: rank: required, at least 0`,
		},
		"fractional rank": {
			line:    `{"op":"report","rank":1.5,"metrics":{}}`,
			wantErr: `bad request: json: cannot unmarshal number 1.5 into Go struct field Request.rank of type int`,
		},
		"string metric": {
			line:    `{"op":"report","rank":0,"metrics":{"loss":"high"}}`,
			wantErr: `report: metric "loss": "high" is not a number; metrics must be numbers`,
		},
		"list metric": {
			line:    `{"op":"report","rank":0,"metrics":{"loss":[1,2]}}`,
			wantErr: `report: metric "loss": [1,2] is not a number; metrics must be numbers`,
		},
		"null metric": {
			line:    `{"op":"report","rank":0,"metrics":{"loss":null}}`,
			wantErr: `report: metric "loss": null is not a number; metrics must be numbers`,
		},
		"bool metric": {
			line:    `{"op":"report","rank":0,"metrics":{"ok":true}}`,
			wantErr: `report: metric "ok": true is not a number; metrics must be numbers`,
		},
		"lower-case nan": {
			line:    `{"op":"report","rank":0,"metrics":{"loss":"nan"}}`,
			wantErr: `report: metric "loss": "nan" is not a number; metrics must be numbers`,
		},
		"number out of range": {
			line:    `{"op":"report","rank":0,"metrics":{"loss":1e400}}`,
			wantErr: `report: metric "loss": 1e400 is not a number; metrics must be numbers`,
		},
		"empty metric name": {
			line:    `{"op":"report","rank":0,"metrics":{"":1}}`,
			wantErr: `report: metric name "": must be 1 to 256 characters`,
		},
		"metric name too long": {
			line:    `{"op":"report","rank":0,"metrics":{"` + long + `y":1}}`,
			wantErr: `report: metric name "` + long + `y": must be 1 to 256 characters`,
		},
		"too many metrics": {
			line:    manyMetrics(MaxMetrics + 1),
			wantErr: `report: 1001 metrics; at most 1000`,
		},
		"metrics not an object": {
			line:    `{"op":"report","rank":0,"metrics":[1]}`,
			wantErr: `bad request: json: cannot unmarshal array into Go struct field Request.metrics of type map[string]json.RawMessage`,
		},
		"not JSON": {
			line:    `hello`,
			wantErr: `bad request: invalid character 'h' looking for beginning of value`,
		},
		"empty line": {
			line:    ``,
			wantErr: `bad request: unexpected end of JSON input`,
		},
		"cut short": {
			line:    `{"op":"report","rank":0,"metr`,
			wantErr: `bad request: unexpected end of JSON input`,
		},
		"two values": {
			line:    `{"op":"report","rank":0} {"op":"report","rank":1}`,
			wantErr: `bad request: invalid character '{' after top-level value`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode([]byte(tc.line))
			if gotErr := errString(err); gotErr != tc.wantErr {
				t.Fatalf("Decode error = %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateNaNs(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

// errString returns err's message, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzDecode checks that Decode never panics and that whatever it accepts is a report of
// numbers within the limits: each metric is the number, or the non-finite string, that
// the line holds for it. More seeds are in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"op":"report","rank":0,"metrics":{"loss":0.25,"step":100},"checkpoint":"/a/b"}`,
		`{"op":"report","rank":2,"metrics":{"a":"NaN","b":"Infinity","c":"-Infinity"},"checkpoint":null}`,
		`not json`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rep, err := Decode(line)
		if err != nil {
			return
		}
		checkDecoded(t, line, rep)
	})
}

// checkDecoded checks a report that Decode returned for line against the line itself.
func checkDecoded(t *testing.T, line []byte, rep Report) {
	t.Helper()
	if rep.Rank < 0 || len(rep.Metrics) > MaxMetrics {
		t.Fatalf("Decode(%q) = rank %d, %d metrics", line, rep.Rank, len(rep.Metrics))
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		t.Fatalf("Decode accepted %q, which does not unmarshal: %v", line, err)
	}
	if len(req.Metrics) != len(rep.Metrics) {
		t.Fatalf("Decode(%q) has %d metrics, the line %d", line, len(rep.Metrics), len(req.Metrics))
	}
	for name, raw := range req.Metrics {
		if name == "" || len(name) > MaxMetricName {
			t.Errorf("Decode(%q) accepted the metric name %q", line, name)
		}
		want, ok := jsonNumber(raw)
		got, have := rep.Metrics[name]
		if !ok || !have || !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("Decode(%q): metric %q = %v (present %v), from %s", line, name, got, have, raw)
		}
	}
}

// jsonNumber returns the value of a JSON number or of one of the strings "NaN",
// "Infinity" and "-Infinity"; ok is false for any other JSON value.
func jsonNumber(raw json.RawMessage) (v float64, ok bool) {
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		v, err := strconv.ParseFloat(string(raw), 64)
		return v, err == nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	switch s {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	return 0, false
}

// Metric names that Trainyard records itself would overwrite its own columns.
func TestDecodeReservedMetricName(t *testing.T) {
	_, err := Decode([]byte(`{"op":"report","rank":0,"metrics":{"timestamp":1}}`))
	want := `report: metric name "timestamp" is one Trainyard records itself; rename the metric`
	if err == nil || err.Error() != want {
		t.Errorf("Decode: %v, want %q", err, want)
	}
}
