package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/auth"
)

// The CLI sends the token it finds in the token file only to the server that file
// belongs to; told to reach another, it sends none and says why the server refused.
func TestTokenFileOnlyForItsServer(t *testing.T) {
	url := startAPI(t)
	addr := strings.TrimPrefix(url, "http://")
	tokenPath := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenPath, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := auth.RecordServer(tokenPath, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	t.Setenv(auth.EnvTokenFile, tokenPath)
	t.Setenv("TRAINYARD_TOKEN", "")

	code, _, errOut := trainyard("list", "--address", url)
	want := "trainyard: the token in " + tokenPath + " belongs to 127.0.0.1:1, not " + addr +
		"; pass --token-file (or TRAINYARD_TOKEN) to send it there\n"
	if code != 1 || errOut != want {
		t.Errorf("list at another address: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
	if code, out, errOut := trainyard("list", "--address", url, "--token-file", tokenPath); code != 0 || out != "No jobs.\n" {
		t.Errorf("list with --token-file: exit %d, %q, %q", code, out, errOut)
	}
	if err := auth.RecordServer(tokenPath, addr); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := trainyard("list", "--address", url); code != 0 || out != "No jobs.\n" {
		t.Errorf("list at the token file's server: exit %d, %q, %q", code, out, errOut)
	}
}

func TestStartWarnings(t *testing.T) {
	cases := map[string]struct {
		listen     string
		allowHosts []string
		euid       int
		want       []string // the start of each warning
	}{
		"none":        {euid: 1000},
		"listen":      {listen: "listening on 0.0.0.0:8265 without TLS", euid: 1000, want: []string{"listening on 0.0.0.0:8265 without TLS"}},
		"root":        {euid: 0, want: []string{"the server runs as root"}},
		"any host":    {allowHosts: []string{"gpu-box", "*"}, euid: 1000, want: []string{"--allow-host '*' turns off the Host header check that defends against DNS rebinding"}},
		"named hosts": {allowHosts: []string{"gpu-box"}, euid: 1000},
		"all at once": {listen: "listening", allowHosts: []string{"*"}, euid: 0, want: []string{"listening", "the server runs as root", "--allow-host '*'"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := startWarnings(c.listen, serverOptions{allowHosts: c.allowHosts}, c.euid)
			var starts []string
			for i, w := range got {
				if i < len(c.want) && strings.HasPrefix(w, c.want[i]) {
					w = c.want[i]
				}
				starts = append(starts, w)
			}
			if diff := cmp.Diff(c.want, starts); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
