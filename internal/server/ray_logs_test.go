package server

import (
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// driverOutput is what the entrypoint of the logs tests prints: Ray's endpoints must give
// it back byte for byte.
const driverOutput = "first\n\tsecond  \n\x1b[1mbold\x1b[0m\nno newline"

// Ray's /logs and /logs/tail give the driver's raw output, as Ray's do: no "trainyard:"
// lines, no "[rank 0 pid N]" prefixes. The native API keeps them.
func TestRayLogsAreRawOutput(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": `printf 'first\n\tsecond  \n\033[1mbold\033[0m\nno newline'`})
	e.rayWait(id, "SUCCEEDED")
	logs := decode[map[string]string](t, e.request("GET", "/api/jobs/"+url.PathEscape(id)+"/logs", nil))
	if logs["logs"] != driverOutput {
		t.Errorf("Ray's logs %q, want the driver's output %q exactly", logs["logs"], driverOutput)
	}
	if tail := e.readTail("/api/jobs/" + url.PathEscape(id) + "/logs/tail"); tail != driverOutput {
		t.Errorf("Ray's tail %q, want the driver's output %q exactly", tail, driverOutput)
	}
	if tail := e.readTail("/api/v1/jobs/" + id + "/logs/tail"); !strings.Contains(tail, "[rank 0 pid ") || !strings.Contains(tail, "trainyard:") {
		t.Errorf("the native tail lost the console log's prefixes or its trainyard lines:\n%s", tail)
	}
	native := e.request("GET", "/api/v1/jobs/"+id+"/logs", nil)
	wantStatus(t, native, 200)
	if text := string(native.body); !strings.Contains(text, "[rank 0 pid ") || !strings.Contains(text, "trainyard:") {
		t.Errorf("the native console log lost its prefixes or its trainyard lines:\n%s", text)
	}
}

// The driver's output spans attempts: rank 0's log of each, in attempt order (10 after
// 2), from inside the run folder only.
func TestReadDriverLog(t *testing.T) {
	run := t.TempDir()
	write := func(attempt, content string) {
		dir := filepath.Join(run, "logs", "attempt-"+attempt)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rank-0.log"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rank-1.log"), []byte("not the driver\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1", "one\n")
	write("10", "ten")
	write("2", "two\n")
	got, err := readDriverLog(t, run, maxLogBytes)
	if err != nil || got != "one\ntwo\nten" {
		t.Errorf("readDriverLog = %q, %v; want %q", got, err, "one\ntwo\nten")
	}
	got, err = readDriverLog(t, run, 6)
	if want := "[LOG TRUNCATED — showing last 0.0 MiB of 0.0 MiB total]\nten"; err != nil || got != want {
		t.Errorf("readDriverLog over its limit = %q, %v; want %q", got, err, want)
	}
	// A log that is a symbolic link out of the run folder is not read.
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(run, "logs", "attempt-11")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "rank-0.log")); err != nil {
		t.Fatal(err)
	}
	if got, _ := readDriverLog(t, run, maxLogBytes); strings.Contains(got, "secret") {
		t.Errorf("read through a symbolic link: %q", got)
	}
	if got, err := readDriverLog(t, filepath.Join(run, "not-yet"), maxLogBytes); got != "" || err != nil {
		t.Errorf("a run folder not made yet: %q, %v; want empty", got, err)
	}
}

// readTail reads a log tail WebSocket at path until the server closes it.
func (e *env) readTail(path string) string {
	e.t.Helper()
	conn, err := e.dialTailAt(path, e.web.URL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	var tail strings.Builder
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var msg string
		err := websocket.Message.Receive(conn, &msg)
		if errors.Is(err, io.EOF) {
			return tail.String()
		}
		if err != nil {
			e.t.Fatalf("%s: after %q: %v", path, tail.String(), err)
		}
		tail.WriteString(msg)
	}
}
