package cli

import (
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/server"
)

func TestParseQuota(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"the default":     {in: defaultUploadQuota, want: server.DefaultUploadQuota},
		"binary units":    {in: "500Mi", want: 500 << 20},
		"decimal units":   {in: "2G", want: 2_000_000_000},
		"bytes":           {in: "123456", want: 123456},
		"unset":           {in: "", want: 0},
		"zero":            {in: "0", wantErr: true},
		"negative":        {in: "-1Gi", wantErr: true},
		"not a size":      {in: "lots", wantErr: true},
		"a unit of speed": {in: "10GB/s", wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseQuota(c.in)
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--upload-quota") {
					t.Errorf("parseQuota(%q) = %d, %v; want an error naming the flag", c.in, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("parseQuota(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
		})
	}
}
