package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Commit and BuildDate are the build's git commit and time (RFC 3339), set at link time
// with -X as Version is (the Makefile does). A build without them (go build, go install)
// takes both from the version control stamp Go puts in the binary, if any.
var (
	Commit    = ""
	BuildDate = ""
)

// versionInfo is what trainyard version prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// buildVersion returns this binary's version information: the link-time values, else the
// version control stamp of build, else "unknown".
func buildVersion(build *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: Version, Commit: Commit, BuildDate: BuildDate, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok {
		stamp := map[string]string{}
		for _, s := range build.Settings {
			stamp[s.Key] = s.Value
		}
		if v.Commit == "" && stamp["vcs.revision"] != "" {
			v.Commit = stamp["vcs.revision"]
			if stamp["vcs.modified"] == "true" {
				v.Commit += "-dirty"
			}
		}
		if v.BuildDate == "" {
			// Go stamps the commit's time, not the build's: the closest it knows.
			v.BuildDate = stamp["vcs.time"]
		}
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	if v.BuildDate == "" {
		v.BuildDate = "unknown"
	}
	return v
}

// String is the one line trainyard version and trainyard --version print.
func (v versionInfo) String() string {
	return fmt.Sprintf("trainyard %s (commit %s, built %s, %s, %s)", v.Version, v.Commit, v.BuildDate, v.GoVersion, v.Platform)
}

func newVersionCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print trainyard's version, commit and build date",
		Long: `Print trainyard's version, the git commit it was built from, when it was built, the Go
version and the platform; -o json prints them as a JSON object. trainyard --version
prints the same line.`,
		Example: `  trainyard version
  trainyard version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, "json"); err != nil {
				return err
			}
			v := buildVersion(debug.ReadBuildInfo())
			if output == "json" {
				return printData(g.io.Out, output, v)
			}
			_, err := fmt.Fprintln(g.io.Out, v)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: one line)")
	return cmd
}
