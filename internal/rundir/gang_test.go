package rundir

import (
	"os"
	"path/filepath"
	"testing"
)

// A Ray Train driver's run names its gang's run in ray-driver/gang.json; GangRun follows
// that only to a run folder of this user's that is no link, and ResultsDir falls back
// to the run itself.
func TestGangRun(t *testing.T) {
	storage := t.TempDir()
	driver, gang := filepath.Join(storage, "driver"), filepath.Join(storage, "driver-train")
	for _, d := range []string{filepath.Join(driver, "ray-driver"), gang} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(gang, RecordFile), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(storage, "link")
	if err := os.Symlink(gang, link); err != nil {
		t.Fatal(err)
	}
	notRun := t.TempDir()
	cases := map[string]struct {
		content string // of gang.json; "" writes none
		want    string
	}{
		"the gang's run":       {content: `{"run": "` + gang + `"}`, want: gang},
		"no file":              {want: driver},
		"a relative path":      {content: `{"run": "driver-train"}`, want: driver},
		"a path not clean":     {content: `{"run": "` + storage + `/x/../driver-train"}`, want: driver},
		"a link":               {content: `{"run": "` + link + `"}`, want: driver},
		"a folder with no run": {content: `{"run": "` + notRun + `"}`, want: driver},
		"a missing folder":     {content: `{"run": "` + filepath.Join(storage, "gone") + `"}`, want: driver},
		"no JSON":              {content: `run`, want: driver},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(driver, DriverGangFile)
			os.Remove(file)
			if c.content != "" {
				if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := ResultsDir(driver); got != c.want {
				t.Errorf("ResultsDir = %s, want %s", got, c.want)
			}
		})
	}
}
