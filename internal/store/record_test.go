package store

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	cases := map[string]*Job{
		"spec only":    testJob("a").stored(3, 2).obj(),
		"with env":     func() *Job { j := testJob("a").obj(); j.RuntimeEnv = json.RawMessage(`{"pip":["x"]}`); return j }(),
		"empty object": {ID: "a", Status: Pending, Spec: json.RawMessage("{}")},
		"placed after a restart": func() *Job {
			j := testJob("a").obj()
			j.Status, j.GPUs, j.Restarts = Running, [][]int{{0, 1}}, 2
			return j
		}(),
	}
	for name, j := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := encodeRecord(j)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeRecord(j.ID, b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(j, got); diff != "" {
				t.Errorf("decoded record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordCorrupt(t *testing.T) {
	good, err := encodeRecord(testJob("a").obj())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":            nil,
		"other version":    append([]byte{9}, good[1:]...),
		"cut in header":    good[:20],
		"cut in spec":      good[:len(good)-10],
		"length too large": {recordV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeRecord("a", b); !errors.Is(err, errCorrupt) {
				t.Errorf("decodeRecord: %v, want errCorrupt", err)
			}
		})
	}
}
