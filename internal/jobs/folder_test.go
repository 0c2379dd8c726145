package jobs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestFolderName(t *testing.T) {
	runName := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// IDs of the old rule keep their folders' names, so that older runs are found.
	for _, id := range []string{"raysubmit_abcDEF0123456789", "mnist-1", "a.b_c"} {
		if got := FolderName(id); got != id {
			t.Errorf("FolderName(%q) = %q, want the ID itself", id, got)
		}
	}
	ids := []string{"../../etc", "a/b", "a_b", "has space", "ünïcødé-ジョブ", "..", ".", "-x", "x--0123456789abcdef",
		strings.Repeat("long", 1000), strings.Repeat("long", 1000) + "!", "nul\x00byte", "a\\b", "/abs"}
	seen := map[string]string{}
	for _, id := range ids {
		got := FolderName(id)
		if !runName.MatchString(got) || filepath.Base(got) != got {
			t.Errorf("FolderName(%q) = %q, not a valid run name", truncated(id), got)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("FolderName(%q) = FolderName(%q) = %q", truncated(id), truncated(other), got)
		}
		seen[got] = id
		if got != FolderName(id) {
			t.Errorf("FolderName(%q) changes", truncated(id))
		}
	}
	// A plain ID shaped like a derived name is derived too, so it cannot take the folder
	// of the ID it was derived from.
	derived := FolderName("a/b")
	if FolderName(derived) == derived {
		t.Errorf("the ID %q names the folder of \"a/b\"", derived)
	}
	if got := FolderName("../../etc"); !strings.HasPrefix(got, "etc--") {
		t.Errorf("FolderName(\"../../etc\") = %q, want the readable prefix \"etc--\"", got)
	}
}

func truncated(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
