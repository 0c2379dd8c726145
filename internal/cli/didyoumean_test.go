package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A mistyped flag exits 2 with the nearest flags of its command: a few edits away, or
// ones it begins; a flag near none says only where the help is.
func TestUnknownFlagSuggestion(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string // stderr
	}{
		"a letter short": {args: []string{"run", "--worker", "2", "--", "true"},
			want: "trainyard: unknown flag: --worker; did you mean --workers? (see 'trainyard run --help')\n"},
		"a long name with one dash": {args: []string{"run", "-worker", "2", "--", "true"},
			want: "trainyard: unknown shorthand flag: 'w' in -worker; did you mean --workers? (see 'trainyard run --help')\n"},
		"with its value": {args: []string{"run", "--worker=2", "--", "true"},
			want: "trainyard: unknown flag: --worker; did you mean --workers? (see 'trainyard run --help')\n"},
		"two letters swapped": {args: []string{"list", "--outptu", "json"},
			want: "trainyard: unknown flag: --outptu; did you mean --output? (see 'trainyard list --help')\n"},
		"a letter missing inside": {args: []string{"submit", "--gpu-per-worker", "1", "--", "true"},
			want: "trainyard: unknown flag: --gpu-per-worker; did you mean --gpus-per-worker? (see 'trainyard submit --help')\n"},
		"an inherited flag": {args: []string{"devices", "--log-levl", "debug"},
			want: "trainyard: unknown flag: --log-levl; did you mean --log-level? (see 'trainyard devices --help')\n"},
		"the start of several": {args: []string{"submit", "--work", "x", "--", "true"},
			want: "trainyard: unknown flag: --work; did you mean --workdir, --workers or --working-dir? (see 'trainyard submit --help')\n"},
		"a subcommand's flag": {args: []string{"top", "node", "--outpt", "json"},
			want: "trainyard: unknown flag: --outpt; did you mean --output? (see 'trainyard top node --help')\n"},
		"near none": {args: []string{"run", "--zzzzz", "--", "true"},
			want: "trainyard: unknown flag: --zzzzz (see 'trainyard run --help')\n"},
		"a single unknown letter": {args: []string{"run", "-Q", "--", "true"},
			want: "trainyard: unknown shorthand flag: 'Q' in -Q (see 'trainyard run --help')\n"},
		"never a deprecated flag": {args: []string{"run", "--rerunx", "--", "true"},
			want: "trainyard: unknown flag: --rerunx (see 'trainyard run --help')\n"},
		"run's own hint for submit's flag": {args: []string{"run", "--working-dir", ".", "--", "true"},
			want: "trainyard: unknown flag: --working-dir; run starts the workers in --workdir, a folder of this machine; --working-dir is submit's, which uploads a folder to a server (see 'trainyard run --help')\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := trainyard(tc.args...)
			if code != ExitUsage || errOut != tc.want {
				t.Errorf("%q: exit %d, stderr\n%q\nwant exit 2 and\n%q", tc.args, code, errOut, tc.want)
			}
		})
	}
}

// Every command that parses flags suggests its own: its first flag with the last letter
// dropped is answered with that flag.
func TestUnknownFlagSuggestionEveryCommand(t *testing.T) {
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
		if c.DisableFlagParsing || c.Hidden {
			return
		}
		var flag string
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if flag == "" && !f.Hidden && f.Deprecated == "" && len(f.Name) > 3 {
				flag = f.Name
			}
		})
		if flag == "" {
			return
		}
		args := append(append([]string{}, path...), "--"+flag[:len(flag)-1])
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, errOut := trainyard(args...)
			if code != ExitUsage || !strings.Contains(errOut, "did you mean ") || !strings.Contains(errOut, "--"+flag) {
				t.Errorf("exit %d, stderr %q; want exit 2 and a suggestion of --%s", code, errOut, flag)
			}
		})
	}
	walk(NewRoot(IO{}), nil)
}
