package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// submit --working-dir uploads the local folder, with a warning for a symbolic link, and
// the job starts in the server's copy; --workdir with it is a usage error.
func TestSubmitWorkingDir(t *testing.T) {
	addr := startAPI(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(dir, "link.sh")); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := trainyard("submit", "--no-wait", "--working-dir", dir, "--", "sh", "run.sh")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "raysubmit_") || !strings.Contains(errOut, "warning: --working-dir: leaving out "+filepath.Join(dir, "link.sh")) {
		t.Fatalf("submit --working-dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = trainyard("get", id, "-o", "json")
	if code != 0 || !strings.Contains(out, `"workingDir": "`) || strings.Contains(out, `"workingDir": "`+dir) {
		t.Errorf("get -o json: exit %d, want a working folder of the server's own:\n%s", code, out)
	}
	// The same folder again: the server has the package already.
	if code, _, errOut := trainyard("submit", "--no-wait", "--working-dir", dir, "--", "sh", "run.sh"); code != 0 {
		t.Errorf("second submit: exit %d, %s", code, errOut)
	}

	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"with --workdir": {[]string{"--working-dir", dir, "--workdir", dir}, 2, "trainyard: --working-dir and --workdir " + dir + " both say where the workers start"},
		"not a folder":   {[]string{"--working-dir", filepath.Join(dir, "run.sh")}, 2, "trainyard: --working-dir: working folder " + filepath.Join(dir, "run.sh") + " is not a folder"},
		"missing":        {[]string{"--working-dir", filepath.Join(dir, "nope")}, 2, "trainyard: --working-dir: working folder: lstat"},
	}
	for name, c := range cases {
		args := append(append([]string{"submit", "--no-wait"}, c.args...), "--", "true")
		code, _, errOut := trainyard(args...)
		if code != c.code || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want %d and one line starting %q", name, code, errOut, c.code, c.want)
		}
	}
}
