package auth

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goodToken is a well-formed token that tests write into token files by hand.
const goodToken = "0123456789abcdefghijABCDEFGHIJ-_.~+/"

func TestDefaultTokenPath(t *testing.T) {
	cases := map[string]struct {
		tokenFile, xdg, home string
		want                 string
	}{
		"TRAINYARD_TOKEN_FILE wins": {tokenFile: "/etc/ty/tok", xdg: "/x", home: "/h", want: "/etc/ty/tok"},
		"XDG_CONFIG_HOME":           {xdg: "/x", home: "/h", want: "/x/trainyard/token"},
		"relative XDG ignored":      {xdg: "rel/cfg", home: "/h", want: "/h/.config/trainyard/token"},
		"home":                      {home: "/h", want: "/h/.config/trainyard/token"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvTokenFile, tc.tokenFile)
			t.Setenv("XDG_CONFIG_HOME", tc.xdg)
			t.Setenv("HOME", tc.home)
			got, err := DefaultTokenPath()
			if err != nil {
				t.Fatalf("DefaultTokenPath: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DefaultTokenPath (-want +got):\n%s", diff)
			}
		})
	}
}

// The dashboard's token has a file of its own beside the server's, which
// $TRAINYARD_TOKEN_FILE does not move.
func TestDefaultDashboardTokenPath(t *testing.T) {
	t.Setenv(EnvTokenFile, "/etc/ty/tok")
	t.Setenv(EnvDashboardTokenFile, "")
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/h")
	if got, err := DefaultDashboardTokenPath(); err != nil || got != "/h/.config/trainyard/dashboard-token" {
		t.Errorf("DefaultDashboardTokenPath = %q, %v", got, err)
	}
	t.Setenv(EnvDashboardTokenFile, "/d/tok")
	if got, err := DefaultDashboardTokenPath(); err != nil || got != "/d/tok" {
		t.Errorf("with %s: %q, %v", EnvDashboardTokenFile, got, err)
	}
}

func TestLoadOrCreateCreatesPrivateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config", "trainyard")
	path := filepath.Join(dir, "token")
	tok, err := LoadOrCreate(path)
	if err != nil {
		t.Fatalf("LoadOrCreate: %v", err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 32 {
		t.Errorf("token %q: want 32 bytes in unpadded base64url, got %d bytes, error %v", tok, len(raw), err)
	}
	got := map[string]any{"file": modeOf(t, path), "dir": modeOf(t, dir), "entries": entriesOf(t, dir)}
	want := map[string]any{"file": fs.FileMode(0o600), "dir": fs.ModeDir | 0o700, "entries": []string{"token"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token file (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tok+"\n", string(data)); diff != "" {
		t.Errorf("file contents (-want +got):\n%s", diff)
	}
}

func TestLoadOrCreateReusesToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	first, err := LoadOrCreate(path)
	if err != nil {
		t.Fatalf("first LoadOrCreate: %v", err)
	}
	second, err := LoadOrCreate(path)
	if err != nil {
		t.Fatalf("second LoadOrCreate: %v", err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff([]string{first, first}, []string{second, loaded}); diff != "" {
		t.Errorf("tokens after the first (-want +got):\n%s", diff)
	}
}

func TestLoadOrCreateConcurrentAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trainyard")
	path := filepath.Join(dir, "token")
	const n = 10
	toks := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { toks[i], errs[i] = LoadOrCreate(path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("LoadOrCreate %d: %v", i, err)
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = toks[0]
	}
	if diff := cmp.Diff(want, toks); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"token"}, entriesOf(t, dir)); diff != "" {
		t.Errorf("folder entries, no temporary files left (-want +got):\n%s", diff)
	}
}

func TestLoadAcceptsHandWrittenToken(t *testing.T) {
	cases := map[string]string{
		"no newline":   goodToken,
		"newline":      goodToken + "\n",
		"CRLF":         goodToken + "\r\n",
		"padding":      goodToken + "==\n",
		"hex from Ray": strings.Repeat("0f", 16),
	}
	for name, contents := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeTokenFile(t, contents, 0o600)
			got, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(strings.TrimSpace(contents), got); diff != "" {
				t.Errorf("token (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRefuses(t *testing.T) {
	cases := map[string]struct {
		contents string
		mode     fs.FileMode
		wantErr  string // %s is the path
	}{
		"group and others may read": {goodToken, 0o644,
			"token file %s has mode 0644; it must be readable by its owner only: chmod 600 %s"},
		"group may read":     {goodToken, 0o640, "has mode 0640"},
		"others may write":   {goodToken, 0o602, "has mode 0602"},
		"group may write":    {goodToken, 0o620, "has mode 0620"},
		"empty":              {"", 0o600, "token file %s is empty"},
		"blank lines":        {"\n\n", 0o600, "token file %s is empty"},
		"two words":          {goodToken + " " + goodToken, 0o600, "token file %s is malformed: it must hold one line"},
		"two lines":          {goodToken + "\n" + goodToken, 0o600, "is malformed: it must hold one line"},
		"bad character":      {goodToken + "!", 0o600, "is malformed: it must hold one line"},
		"padding only":       {"====", 0o600, "is malformed: it must hold one line"},
		"too short":          {"abc123", 0o600, "is malformed: its token has 6 characters, and at least 32"},
		"too long":           {strings.Repeat("a", 5000), 0o600, "is malformed: it is over 4096 bytes"},
		"loose and too long": {strings.Repeat("a", 5000), 0o666, "has mode 0666"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeTokenFile(t, tc.contents, tc.mode)
			for fn, load := range map[string]func(string) (string, error){"Load": Load, "LoadOrCreate": LoadOrCreate} {
				tok, err := load(path)
				want := strings.ReplaceAll(tc.wantErr, "%s", path)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s = %q, %v; want an error containing %q", fn, tok, err, want)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil || string(data) != tc.contents {
				t.Errorf("the refused file was changed: %q, %v", data, err)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	_, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v; want an error wrapping fs.ErrNotExist", err)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("Load created %s", path)
	}
}

func TestLoadRefusesFolder(t *testing.T) {
	path := t.TempDir()
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("Load of a folder: %v; want a not-a-regular-file error", err)
	}
}

func TestLoadRefusesFileOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	path := writeTokenFile(t, goodToken, 0o600)
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "is owned by uid 4242") {
		t.Errorf("Load: %v; want an owned-by-another-user error", err)
	}
}

// writeTokenFile writes contents to a new token file with the given mode and returns its
// path.
func writeTokenFile(t *testing.T, contents string, mode fs.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(contents), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

// modeOf returns the mode of the file at path.
func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

// entriesOf returns the names in the folder dir.
func entriesOf(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
