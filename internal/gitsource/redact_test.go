package gitsource

import (
	"strings"
	"testing"
)

// A URL's user information never reaches a message, whether the URL parses or not.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://bob:pw@h/o/r.git":  "https://***@h/o/r.git",
		"https://bob:p w@h/o/r.git": "https://***@h/o/r.git",
		"ssh://bob:pw@h/o/r.git":    "ssh://***@h/o/r.git",
		"https://h/o/r@v.git":       "https://h/o/r@v.git",
		"file:///srv/r.git":         "file:///srv/r.git",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	for _, u := range []string{"https://bob:pw@h/o/r.git", "https://bob:p w@h/o/r.git", "ssh://bob:pw@h/o/r.git", "https://bob:pw@/r.git"} {
		err := Check(Source{URL: u})
		if err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("Check(%q) = %v, want an error without the password", u, err)
		}
	}
}
