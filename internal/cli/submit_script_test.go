package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// submit is refused (exit 2, nothing created) when the script a Python command runs is
// not in the folder the workers start in: this folder on the server's machine, or the
// uploaded --working-dir; -m, -c and other programs are sent as they are.
func TestSubmitChecksTheScript(t *testing.T) {
	t.Setenv("TRAINYARD_ADDRESS", startAPI(t))
	t.Setenv("TRAINYARD_TOKEN", testToken)
	here, pkg := t.TempDir(), t.TempDir()
	t.Chdir(here)
	for _, dir := range []string{here, pkg} {
		if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("print(1)\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	cases := map[string]struct {
		args []string
		code int
		want string // on stderr, for a refusal
	}{
		"a script here":                {args: []string{"--", "/usr/bin/python3", "train.py"}},
		"a script that is nowhere":     {args: []string{"--", "/usr/bin/python3", "nope.py"}, code: 2, want: "script nope.py (run by python3) does not exist in the working folder " + here},
		"an absolute path":             {args: []string{"--", "python3", "/nonexistent/train.py"}, code: 2, want: "script /nonexistent/train.py (run by python3) does not exist"},
		"--workdir without the script": {args: []string{"--workdir", empty, "--", "python3", "train.py"}, code: 2, want: "does not exist in the working folder " + empty},
		"in the uploaded folder":       {args: []string{"--working-dir", pkg, "--", "python3", "train.py"}},
		"not in the uploaded folder":   {args: []string{"--working-dir", empty, "--", "python3", "train.py"}, code: 2, want: "script train.py (run by python3) does not exist"},
		"-m":                           {args: []string{"--", "python3", "-m", "nope"}},
		"-c":                           {args: []string{"--", "python3", "-c", "print(1)"}},
		"another program":              {args: []string{"--", "sh", "nope.py"}},
		"a git source's script outside its clone": {args: []string{"--sync-source", "https://git.example.com/team/mnist.git", "--", "python3", "ddp.py"},
			code: 2, want: "with --sync-source the code is at code/mnist/ddp.py"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, before, _ := trainyard("list", "-o", "json")
			code, out, errOut := trainyard(append([]string{"submit", "--no-wait"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, tc.code, tc.want)
			}
			if _, after, _ := trainyard("list", "-o", "json"); tc.code != 0 && after != before {
				t.Errorf("a refused job was created:\n%s", after)
			}
		})
	}
}
