package upload

import (
	"errors"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	const hint = "; a package name looks like _ray_pkg_<hex>.zip"
	cases := map[string]struct {
		name    string
		wantErr string // "" when valid
	}{
		"Ray package":      {name: "_ray_pkg_0123456789abcdef.zip"},
		"letters and dash": {name: "My-pkg.v2.zip"},
		"one character":    {name: "a.zip"},
		"longest":          {name: strings.Repeat("a", 251) + ".zip"},
		"empty":            {name: "", wantErr: `invalid package name "": it is empty` + hint},
		"too long":         {name: strings.Repeat("a", 252) + ".zip", wantErr: "it is longer than 255 bytes"},
		"only .zip":        {name: ".zip", wantErr: `invalid package name ".zip": it starts with a dot` + hint},
		"hidden":           {name: ".secret.zip", wantErr: "it starts with a dot"},
		"not zip":          {name: "_ray_pkg_abc.whl", wantErr: `invalid package name "_ray_pkg_abc.whl": it does not end in ".zip"` + hint},
		"upper-case ZIP":   {name: "a.ZIP", wantErr: `it does not end in ".zip"`},
		"dot-dot":          {name: "a..zip", wantErr: `it contains ".."`},
		"parent path":      {name: "../a.zip", wantErr: "it starts with a dot"},
		"slash": {name: "gcs/_ray_pkg_abc.zip",
			wantErr: `invalid package name "gcs/_ray_pkg_abc.zip": it contains '/'; only letters, digits, '_', '-' and '.' are allowed` + hint},
		"backslash":       {name: `a\b.zip`, wantErr: `it contains '\\'`},
		"space":           {name: "a b.zip", wantErr: "it contains ' '"},
		"NUL":             {name: "a\x00.zip", wantErr: `it contains '\x00'`},
		"newline":         {name: "a\n.zip", wantErr: `it contains '\n'`},
		"colon":           {name: "gcs:a.zip", wantErr: "it contains ':'"},
		"percent-encoded": {name: "%2e%2e.zip", wantErr: "it contains '%'"},
		"non-ASCII":       {name: "pkg\u00e9.zip", wantErr: "it contains the byte 0xc3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidName(tc.name)
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("ValidName(%q) = %v; want nil", tc.name, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ValidName(%q) = %v; want an ErrInvalidName containing %q", tc.name, err, tc.wantErr)
			}
		})
	}
}
