package tfevents

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// unhex decodes hex written with spaces between groups, as in the golden bytes below.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestAppendVarint(t *testing.T) {
	cases := map[string]struct {
		v    uint64
		want string
	}{
		"zero":              {v: 0, want: "00"},
		"one byte":          {v: 127, want: "7f"},
		"two bytes":         {v: 128, want: "80 01"},
		"300 (spec sample)": {v: 300, want: "ac 02"},
		"int64 -1":          {v: math.MaxUint64, want: "ff ff ff ff ff ff ff ff ff 01"},
		"max int64":         {v: math.MaxInt64, want: "ff ff ff ff ff ff ff ff 7f"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(unhex(t, tc.want), appendVarint(nil, tc.v)); diff != "" {
				t.Errorf("appendVarint(%d) mismatch (-want +got):\n%s", tc.v, diff)
			}
		})
	}
}

// goldenEvents are Events serialized by hand from the protobuf encoding spec:
// key = field<<3 | wire type; double and float little-endian IEEE 754.
var goldenEvents = map[string]struct {
	event event
	hex   string
}{
	"scalar": {
		event: event{wallTime: 1.5, step: 7, summary: []value{{tag: "loss", simpleValue: 0.25}}},
		hex: "09 000000000000f83f" + // wall_time (1, fixed64) = 1.5 = 0x3FF8000000000000
			" 10 07" + // step (2, varint) = 7
			" 2a 0d" + // summary (5, bytes), 13 bytes
			" 0a 0b" + // value (1, bytes), 11 bytes
			" 0a 04 6c6f7373" + // tag (1, bytes) = "loss"
			" 15 0000803e", // simple_value (2, fixed32) = 0.25 = 0x3E800000
	},
	"file version, step 0 left out": {
		event: event{wallTime: 1.5, fileVersion: "brain.Event:2"},
		hex: "09 000000000000f83f" +
			" 1a 0d 627261696e2e4576656e743a32", // file_version (3, bytes) = "brain.Event:2"
	},
	"zero value kept (oneof), two values, negative step": {
		event: event{wallTime: 2, step: -1, summary: []value{{tag: "a", simpleValue: 0}, {tag: "b", simpleValue: -2}}},
		hex: "09 0000000000000040" + // 2.0 = 0x4000000000000000
			" 10 ffffffffffffffff ff01" + // -1 as 64-bit two's complement varint
			" 2a 14" + // summary, 20 bytes
			" 0a 08 0a 01 61 15 00000000" + // value {tag "a", simple_value 0}
			" 0a 08 0a 01 62 15 000000c0", // value {tag "b", simple_value -2 = 0xC0000000}
	},
	"non-finite values": {
		event: event{wallTime: 1.5, step: 1, summary: []value{
			{tag: "i", simpleValue: float32(math.Inf(1))},
			{tag: "n", simpleValue: float32(math.Inf(-1))},
		}},
		hex: "09 000000000000f83f 10 01 2a 14" +
			" 0a 08 0a 01 69 15 0000807f" + // +Inf = 0x7F800000
			" 0a 08 0a 01 6e 15 000080ff", // -Inf = 0xFF800000
	},
}

func TestAppendEventGolden(t *testing.T) {
	for name, tc := range goldenEvents {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(unhex(t, tc.hex), appendEvent(nil, tc.event)); diff != "" {
				t.Errorf("appendEvent mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEventGolden(t *testing.T) {
	for name, tc := range goldenEvents {
		t.Run(name, func(t *testing.T) {
			got, err := decodeEvent(unhex(t, tc.hex))
			if err != nil {
				t.Fatalf("decodeEvent: %v", err)
			}
			if diff := cmp.Diff(tc.event, got, cmp.AllowUnexported(event{}, value{})); diff != "" {
				t.Errorf("decodeEvent mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEvent(t *testing.T) {
	cases := map[string]struct {
		hex  string
		want event
	}{
		"NaN simple_value": {
			hex:  "2a 0a 0a 08 0a 01 78 15 0000c07f",
			want: event{summary: []value{{tag: "x", simpleValue: float32(math.NaN())}}},
		},
		"unknown fields of every wire type are skipped": {
			hex: "10 05" +
				" 58 96 01" + // field 11 varint
				" 61 0102030405060708" + // field 12 fixed64
				" 6a 03 616263" + // field 13 bytes
				" 75 01020304" + // field 14 fixed32
				" 7b 08 01 83 01 84 01 7c" + // field 15 group holding a varint and an empty group 16
				" 2a 0d 0a 0b 0a 04 6c6f7373 15 0000803e" +
				" 82 01 00", // field 16 bytes, two-byte key
			want: event{step: 5, summary: []value{{tag: "loss", simpleValue: 0.25}}},
		},
		"unknown fields inside Summary, metadata and node_name in Value": {
			hex:  "2a 16 12 02 0000 0a 10 0a 01 61 15 0000803f 4a 00 3a 04 6e6f6465",
			want: event{summary: []value{{tag: "a", simpleValue: 1}}},
		},
		"a value without simple_value (an image) is left out": {
			hex:  "2a 11 0a 05 0a 01 61 22 00 0a 08 0a 01 62 15 0000803f",
			want: event{summary: []value{{tag: "b", simpleValue: 1}}},
		},
		"a tensor after simple_value replaces it (oneof)": {
			hex:  "2a 0c 0a 0a 0a 01 61 15 0000803f 42 00",
			want: event{summary: []value{}},
		},
		"two summaries merge": {
			hex:  "2a 0a 0a 08 0a 01 61 15 0000803f 2a 0a 0a 08 0a 01 62 15 00000040",
			want: event{summary: []value{{tag: "a", simpleValue: 1}, {tag: "b", simpleValue: 2}}},
		},
		"last scalar wins": {
			hex:  "10 01 10 02",
			want: event{step: 2},
		},
		"a later member of the oneof clears the summary": {
			hex:  "2a 0a 0a 08 0a 01 61 15 0000803f 22 00",
			want: event{},
		},
		"a wrong wire type is an unknown field": {
			hex:  "15 00000000 10 03",
			want: event{step: 3},
		},
		"empty": {
			hex:  "",
			want: event{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeEvent(unhex(t, tc.hex))
			if err != nil {
				t.Fatalf("decodeEvent: %v", err)
			}
			opts := cmp.Options{cmp.AllowUnexported(event{}, value{}), cmpopts.EquateNaNs()}
			if diff := cmp.Diff(tc.want, got, opts); diff != "" {
				t.Errorf("decodeEvent mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEventErrors(t *testing.T) {
	cases := map[string]struct {
		hex  string
		want string
	}{
		"truncated varint":         {hex: "10 80", want: "message ends inside a field"},
		"truncated fixed64":        {hex: "09 0000", want: "message ends inside a field"},
		"length past the end":      {hex: "1a 05 6162", want: "message ends inside a field"},
		"varint over 64 bits":      {hex: "10 ffffffffffffffffff7f", want: "varint overflows 64 bits"},
		"field number 0":           {hex: "00 00", want: "invalid field number 0"},
		"invalid wire type":        {hex: "0e", want: "invalid wire type 6"},
		"unmatched end group":      {hex: "7c", want: "end of group 15 that was not started"},
		"group ended by another":   {hex: "7b 84 01", want: "group 15 ended by end of group 16"},
		"unterminated group":       {hex: "7b 08 01", want: "message ends inside a field"},
		"bad value in summary":     {hex: "2a 03 0a 01 15", want: "event: summary: value: message ends inside a field"},
		"summary past the end":     {hex: "2a 09 0a", want: "event: message ends inside a field"},
		"fixed32 in value cut off": {hex: "2a 04 0a 02 15 00", want: "value: message ends inside a field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decodeEvent(unhex(t, tc.hex))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decodeEvent error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
