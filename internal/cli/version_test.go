package cli

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The commit and build date come from the link-time values, else from Go's version
// control stamp, else are unknown.
func TestBuildVersion(t *testing.T) {
	stamped := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-11-22T13:45:01Z"}, {Key: "vcs.modified", Value: "true"}}}
	cases := map[string]struct {
		commit, date string
		build        *debug.BuildInfo
		want         versionInfo
	}{
		"set at link time": {commit: "fedcba9", date: "2026-11-23T08:00:00Z", build: stamped,
			want: versionInfo{Commit: "fedcba9", BuildDate: "2026-11-23T08:00:00Z"}},
		"from the stamp": {build: stamped, want: versionInfo{Commit: "0123abc-dirty", BuildDate: "2026-11-22T13:45:01Z"}},
		"no build info":  {want: versionInfo{Commit: "unknown", BuildDate: "unknown"}},
		"no stamp":       {build: &debug.BuildInfo{}, want: versionInfo{Commit: "unknown", BuildDate: "unknown"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			setVar(t, &Commit, tc.commit)
			setVar(t, &BuildDate, tc.date)
			got := buildVersion(tc.build, tc.build != nil)
			tc.want.Version, tc.want.GoVersion, tc.want.Platform = Version, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("buildVersion (-want +got):\n%s", diff)
			}
		})
	}
}

func setVar(t *testing.T, v *string, value string) {
	old := *v
	*v = value
	t.Cleanup(func() { *v = old })
}

// version, version -o json and --version say the same.
func TestVersionCommand(t *testing.T) {
	setVar(t, &Commit, "fedcba9")
	setVar(t, &BuildDate, "2026-11-23T08:00:00Z")
	want := "trainyard " + Version + " (commit fedcba9, built 2026-11-23T08:00:00Z, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		if code, out, errOut := trainyard(args...); code != 0 || out != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", args, code, out, errOut, want)
		}
	}
	code, out, _ := trainyard("version", "-o", "json")
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v:\n%s", code, err, out)
	}
	if got["commit"] != "fedcba9" || got["buildDate"] != "2026-11-23T08:00:00Z" || got["version"] != Version || !strings.HasPrefix(got["goVersion"], "go") {
		t.Errorf("version -o json: %v", got)
	}
}
