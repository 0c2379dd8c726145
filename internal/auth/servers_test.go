package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordServer(t *testing.T) {
	tokenPath := writeTokenFile(t, goodToken, 0o600)
	for _, addr := range []string{"127.0.0.1:8265", ":9000", "127.0.0.1:8265"} {
		if err := RecordServer(tokenPath, addr); err != nil {
			t.Fatalf("RecordServer(%q): %v", addr, err)
		}
	}
	got, err := LoadOwners(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Owners{Addrs: []string{":9000", "127.0.0.1:8265"}}, got); diff != "" {
		t.Errorf("owners after three starts, the last one again (-want +got):\n%s", diff)
	}
	if mode := modeOf(t, ServersPath(tokenPath)); mode != 0o600 {
		t.Errorf("servers file mode %v, want 0600", mode)
	}
	for port := range 20 {
		if err := RecordServer(tokenPath, fmt.Sprintf("127.0.0.1:%d", 10000+port)); err != nil {
			t.Fatal(err)
		}
	}
	got, err = LoadOwners(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Addrs) != maxServers || got.Addrs[maxServers-1] != "127.0.0.1:10019" {
		t.Errorf("owners after 22 starts: %v; want the last %d", got.Addrs, maxServers)
	}
}

// A token file without a servers file belongs to the default address alone.
func TestLoadOwnersLegacy(t *testing.T) {
	got, err := LoadOwners(writeTokenFile(t, goodToken, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Owners{Addrs: []string{"127.0.0.1:8265"}, Legacy: true}, got); diff != "" {
		t.Errorf("owners of a token file alone (-want +got):\n%s", diff)
	}
	for target, want := range map[string]bool{"127.0.0.1:8265": true, "127.0.0.1:8266": false, "gpu-box:8265": false} {
		if got.Allows(target) != want {
			t.Errorf("legacy Allows(%q) = %v, want %v", target, !want, want)
		}
	}
}

func TestLoadOwnersRefuses(t *testing.T) {
	cases := map[string]struct {
		contents string
		mode     os.FileMode
		want     string
	}{
		"others may read": {"127.0.0.1:8265\n", 0o644, "has mode 0644"},
		"not host:port":   {"# comment\n127.0.0.1\n", 0o600, `line 2: "127.0.0.1" is not host:port`},
		"bad port":        {"127.0.0.1:http\n", 0o600, `"127.0.0.1:http" is not host:port`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tokenPath := writeTokenFile(t, goodToken, 0o600)
			if err := os.WriteFile(ServersPath(tokenPath), []byte(c.contents), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(ServersPath(tokenPath), c.mode); err != nil {
				t.Fatal(err)
			}
			for fn, call := range map[string]func() error{
				"LoadOwners":   func() error { _, err := LoadOwners(tokenPath); return err },
				"RecordServer": func() error { return RecordServer(tokenPath, "127.0.0.1:1") },
			} {
				if err := call(); err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v, want an error that says %q", fn, err, c.want)
				}
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		tokenPath := writeTokenFile(t, goodToken, 0o600)
		target := filepath.Join(t.TempDir(), "planted")
		if err := os.WriteFile(target, []byte("10.0.0.9:80\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, ServersPath(tokenPath)); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOwners(tokenPath); err == nil {
			t.Errorf("LoadOwners followed a symlinked servers file")
		}
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("giving a file to another user needs root")
		}
		tokenPath := writeTokenFile(t, goodToken, 0o600)
		if err := os.WriteFile(ServersPath(tokenPath), []byte("10.0.0.9:80\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(ServersPath(tokenPath), 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOwners(tokenPath); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("LoadOwners: %v; want an owned-by-another-user error", err)
		}
	})
}

func TestOwnersAllows(t *testing.T) {
	cases := map[string]struct {
		listen string
		allow  []string
		refuse []string
	}{
		"IPv4 loopback": {"127.0.0.1:8265", []string{"127.0.0.1:8265", "[::ffff:127.0.0.1]:8265"},
			[]string{"127.0.0.1:8266", "[::1]:8265", "localhost:8265", "127.0.0.2:8265", "10.0.0.1:8265"}},
		"IPv6 loopback": {"[::1]:8265", []string{"[::1]:8265", "[0:0:0:0:0:0:0:1]:8265"}, []string{"127.0.0.1:8265", "localhost:8265"}},
		"localhost":     {"localhost:8265", []string{"localhost:8265", "LOCALHOST.:8265"}, []string{"127.0.0.1:8265"}},
		"IPv4 all interfaces": {"0.0.0.0:8265", []string{"127.0.0.1:8265", "127.0.0.2:8265", "0.0.0.0:8265"},
			[]string{"[::1]:8265", "localhost:8265", "192.168.1.5:8265", "127.0.0.1:9000"}},
		"all interfaces": {":8265", []string{"127.0.0.1:8265", "[::1]:8265", "localhost:8265"},
			[]string{"192.168.1.5:8265", "gpu-box:8265", "localhost:80"}},
		"IPv6 all interfaces": {"[::]:8265", []string{"127.0.0.1:8265", "[::1]:8265", "localhost:8265", "[::]:8265"}, []string{"10.0.0.1:8265"}},
		"a LAN address":       {"192.168.1.5:8265", []string{"192.168.1.5:8265"}, []string{"127.0.0.1:8265", "localhost:8265", "192.168.1.6:8265"}},
		"a host name":         {"Gpu-Box:8265", []string{"gpu-box:8265"}, []string{"gpu-box:80", "other:8265", "127.0.0.1:8265"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := Owners{Addrs: []string{c.listen}}
			for _, target := range c.allow {
				if !o.Allows(target) {
					t.Errorf("a server on %s does not allow %s", c.listen, target)
				}
			}
			for _, target := range c.refuse {
				if o.Allows(target) {
					t.Errorf("a server on %s allows %s", c.listen, target)
				}
			}
		})
	}
}
