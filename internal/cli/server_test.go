package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServerFlags(t *testing.T) {
	cases := map[string]struct {
		opts        serverOptions
		wantErr     string
		wantWarning string
	}{
		"loopback":          {opts: serverOptions{address: "127.0.0.1:8265"}},
		"all interfaces":    {opts: serverOptions{address: "0.0.0.0:8265"}, wantWarning: "without TLS"},
		"all, with TLS":     {opts: serverOptions{address: ":8265", tlsCert: "c.pem", tlsKey: "k.pem"}},
		"a URL as address":  {opts: serverOptions{address: "http://127.0.0.1:8265"}, wantErr: "is not host:port"},
		"cert without key":  {opts: serverOptions{address: "127.0.0.1:8265", tlsCert: "c.pem"}, wantErr: "--tls-cert and --tls-key go together"},
		"allowed hosts":     {opts: serverOptions{address: "127.0.0.1:8265", allowHosts: []string{"gpu-box", "gpu-box.example.com:8265", "10.0.0.7", "::1", "[::1]:8265", "*"}}},
		"a URL as host":     {opts: serverOptions{address: "127.0.0.1:8265", allowHosts: []string{"http://gpu-box"}}, wantErr: `--allow-host "http://gpu-box"`},
		"an empty host":     {opts: serverOptions{address: "127.0.0.1:8265", allowHosts: []string{""}}, wantErr: `--allow-host ""`},
		"a wildcard domain": {opts: serverOptions{address: "127.0.0.1:8265", allowHosts: []string{"*.example.com"}}, wantErr: `--allow-host "*.example.com"`},
		"storage in state":  {opts: serverOptions{address: "127.0.0.1:8265", storage: "~/state/runs"}, wantErr: "/state/runs is inside --state-dir"},
		"storage is state":  {opts: serverOptions{address: "127.0.0.1:8265", storage: "~/state/"}, wantErr: "/state is inside --state-dir"},
		"preemption never":  {opts: serverOptions{address: "127.0.0.1:8265", preemption: "never"}},
		"unknown preemption": {opts: serverOptions{address: "127.0.0.1:8265", preemption: "always"},
			wantErr: `--preemption: unknown preemption policy "always": want lower-priority or never`},
		"negative elastic settle": {opts: serverOptions{address: "127.0.0.1:8265", elasticSettle: -time.Second},
			wantErr: "--elastic-settle -1s: give a duration of 0 or more, such as 10s"},
		"no prestart shapes": {opts: serverOptions{address: "127.0.0.1:8265", prestartShapes: -1},
			wantErr: "--prestart-shapes -1: give a number from 1 to 16"},
		"too many prestart shapes": {opts: serverOptions{address: "127.0.0.1:8265", prestartShapes: 17},
			wantErr: "--prestart-shapes 17: give a number from 1 to 16"},
		"prestart shapes without prestart": {opts: serverOptions{address: "127.0.0.1:8265", prestartShapes: 2},
			wantErr: "--prestart-shapes 2 keeps Pythons warm only with --prestart: give both"},
		"prestart shapes": {opts: serverOptions{address: "127.0.0.1:8265", prestart: true, prestartShapes: 3}},
		"empty preemption": {opts: serverOptions{address: "127.0.0.1:8265", preemption: " "},
			wantErr: `--preemption: unknown preemption policy " ": want lower-priority or never`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.opts.stateDir = "~/state"
			if tc.opts.storage == "" {
				tc.opts.storage = "runs"
			}
			if tc.opts.preemption == "" {
				tc.opts.preemption = "lower-priority"
			}
			if tc.opts.prestartShapes == 0 {
				tc.opts.prestartShapes = 1 // the flag's default
			}
			warning, err := tc.opts.check()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc.wantWarning == "") != (warning == "") || !strings.Contains(warning, tc.wantWarning) {
				t.Errorf("warning %q, want %q", warning, tc.wantWarning)
			}
			if string(tc.opts.preemptionPolicy) != tc.opts.preemption {
				t.Errorf("preemption policy %q, want %q", tc.opts.preemptionPolicy, tc.opts.preemption)
			}
			home, _ := os.UserHomeDir()
			if tc.opts.stateDir != filepath.Join(home, "state") || !filepath.IsAbs(tc.opts.storage) {
				t.Errorf("folders %q and %q, want both absolute, ~ expanded", tc.opts.stateDir, tc.opts.storage)
			}
		})
	}
}

func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good", "MemTotal:       32803576 kB\nMemFree:         1234 kB\n")
	if got, err := memTotal(good); err != nil || got != 32803576*1024 {
		t.Errorf("memTotal = %d, %v; want %d", got, err, 32803576*1024)
	}
	for name, text := range map[string]string{"none": "MemFree: 1 kB\n", "garbled": "MemTotal: lots kB\n"} {
		if _, err := memTotal(write(name, text)); err == nil || !strings.Contains(err.Error(), "MemTotal") {
			t.Errorf("%s: error %v, want one about MemTotal", name, err)
		}
	}
	if got, err := memTotal("/proc/meminfo"); err != nil || got <= 0 {
		t.Errorf("this machine's memory: %d, %v", got, err)
	}
}

// A storage path another user could change is refused when the server starts, saying
// how to fix it.
func TestServerRefusesUntrustedStorage(t *testing.T) {
	open := filepath.Join(t.TempDir(), "runs")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	opts := serverOptions{address: "127.0.0.1:8265", stateDir: t.TempDir(), storage: open}
	if _, err := opts.check(); err == nil || !strings.Contains(err.Error(), "--storage-path") || !strings.Contains(err.Error(), "chmod +t") {
		t.Errorf("error %v, want one naming --storage-path and chmod +t", err)
	}
}

// A bucket is taken as the server's storage path (each job checks it with its own
// credentials); a URI of another scheme is refused when the server starts.
func TestServerStorageURI(t *testing.T) {
	opts := serverOptions{address: "127.0.0.1:8265", stateDir: t.TempDir(), storage: "s3://bucket/runs", preemption: "never", prestartShapes: 1}
	if _, err := opts.check(); err != nil {
		t.Errorf("s3://: %v", err)
	}
	opts.storage = "gs://bucket/runs"
	if _, err := opts.check(); err == nil || !strings.Contains(err.Error(), "--storage-path: gs://bucket/runs: gs:// is not supported yet") {
		t.Errorf("error %v, want one saying gs:// is not supported", err)
	}
}
