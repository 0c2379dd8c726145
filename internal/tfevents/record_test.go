package tfevents

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMaskedCRC(t *testing.T) {
	// CRC-32C("123456789") = 0xE3069283 (the standard check value). Masked by hand:
	// rotate right 15 = 0x2507C60D, + 0xA282EAD8 = 0xC78AB0E5.
	cases := map[string]struct {
		data string
		want uint32
	}{
		"check vector": {data: "123456789", want: 0xC78AB0E5},
		"empty":        {data: "", want: 0xA282EAD8},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := maskedCRC([]byte(tc.data)); got != tc.want {
				t.Errorf("maskedCRC(%q) = 0x%08X, want 0x%08X", tc.data, got, tc.want)
			}
		})
	}
}

func TestAppendRecordGolden(t *testing.T) {
	// The CRCs were computed with testdata/read_tfevents.py's own CRC-32C.
	cases := map[string]struct {
		data string
		want string
	}{
		"check vector": {
			data: "313233343536373839",
			want: "0900000000000000 37f97139 313233343536373839 e5b08ac7",
		},
		"scalar event": {
			data: goldenEvents["scalar"].hex,
			want: "1a00000000000000 129bd82d " + goldenEvents["scalar"].hex + " c9d07b8d",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := appendRecord([]byte("prefix"), unhex(t, tc.data))
			want := append([]byte("prefix"), unhex(t, tc.want)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("appendRecord mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
