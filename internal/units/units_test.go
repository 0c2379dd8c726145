package units

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Cores(16000), "16"}, {Cores(1500), "1.5"}, {Cores(250), "0.25"},
		{Duration(10 * time.Minute), "10m"}, {Duration(time.Hour), "1h"}, {Duration(90 * time.Minute), "1h30m"},
		{Duration(90 * time.Second), "1m30s"}, {Duration(2 * time.Second), "2s"}, {Duration(0), "0s"},
		{BytesIEC(512), "512"}, {BytesIEC(512 << 20), "512Mi"}, {BytesIEC(125_800 << 20), "122.9Gi"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
