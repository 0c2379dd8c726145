package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// squatter is the local user who listens on the server's port while the server is down.
const squatter = "trainyard-squatter"

// listenerScript records every request it gets, raw, into a file, and answers each as
// a made-up trainyard server would: 200 with a job list and a made-up proof.
const listenerScript = `
import socket, sys
port, out = int(sys.argv[1]), sys.argv[2]
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(16)
open(out + ".ready", "w").close()
while True:
    conn, _ = srv.accept()
    conn.settimeout(5)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk: break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"): n = int(line.split(b":")[1])
        while len(body) < n:
            chunk = conn.recv(65536)
            if not chunk: break
            body += chunk
        with open(out, "ab") as f: f.write(head + b"\r\n\r\n" + body + b"\n=====\n")
        answer = b'{"jobs": [], "session": "made-up", "serverProof": "made-up"}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
                     + str(len(answer)).encode() + b"\r\n\r\n" + answer)
    except Exception:
        pass
    conn.close()
`

// ensureUser creates the local user name when it is missing.
func ensureUser(t *testing.T, name string) {
	t.Helper()
	if exec.Command("id", name).Run() == nil {
		return
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
}

// With the server stopped, another local user listens on its recorded port. The CLI,
// which finds the token by itself and sends it only to recorded addresses, sends that
// listener nothing it could use: a challenge, then it stops and says what answered. What
// the listener recorded opens nothing on the real server once it is back.
func TestAnotherUserOnTheServersPortLearnsNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to listen as another local user (useradd, runuser)")
	}
	ensureUser(t, squatter)
	dir := t.TempDir()
	s := newJobServer(t, dir)
	port := strings.TrimPrefix(s.addr, "http://127.0.0.1:")
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	token, err := os.ReadFile(filepath.Join(dir, "config", "token"))
	if err != nil {
		t.Fatal(err)
	}

	base, err := os.MkdirTemp("", "squat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	own := filepath.Join(base, "squatter") // the listener's own folder
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, own, squatter)
	record := filepath.Join(own, "requests")
	listener := exec.Command("runuser", "-u", squatter, "--", "/usr/bin/python3", "-c", listenerScript, port, record)
	var lout bytes.Buffer
	listener.Stdout, listener.Stderr = &lout, &lout
	listener.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // runuser and python3, killed together
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	stopListener := func() { _ = syscall.Kill(-listener.Process.Pid, syscall.SIGKILL); _ = listener.Wait() }
	t.Cleanup(stopListener)
	waitFile(t, record+".ready", &lout)

	for _, args := range [][]string{{"list"}, {"open", "--print"}, {"stop", "some-job"},
		{"submit", "--no-wait", "--", "sh", "-c", "echo hi"}} {
		code, out := run(t, dir, s.env, append([]string{args[0], "--address", "127.0.0.1:" + port}, args[1:]...)...)
		if code == 0 || !strings.Contains(out, "could not prove that it holds your token") {
			t.Errorf("trainyard %s against the listener: exit %d, want an error saying it could not prove the token:\n%s",
				strings.Join(args, " "), code, out)
		}
	}
	got, err := os.ReadFile(record)
	if err != nil || len(got) == 0 {
		t.Fatalf("the listener recorded nothing (%v); the test proves nothing:\n%s", err, lout.String())
	}
	if bytes.Contains(got, bytes.TrimSpace(token)) || bytes.Contains(bytes.ToLower(got), []byte("authorization:")) {
		t.Errorf("the listener got the token or a proof:\n%s", got)
	}
	requests := bytes.Split(bytes.TrimSuffix(got, []byte("\n=====\n")), []byte("\n=====\n"))
	for _, r := range requests {
		if !bytes.HasPrefix(r, []byte("POST /api/v1/auth/challenge ")) {
			t.Errorf("the listener got more than a challenge:\n%s", r)
		}
	}
	t.Logf("the listener recorded %d requests, all challenges (a random nonce each)", len(requests))

	// Back on its port, the real server gives a replayed request nothing to do.
	stopListener()
	s.start(t)
	t.Cleanup(func() { s.stopJobs(t); _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	for _, r := range requests {
		if code := replayRaw(t, "127.0.0.1:"+port, r); code != http.StatusOK {
			t.Errorf("replayed challenge answered %d", code)
		}
	}
	if code, out := s.cli(t, "list", "-o", "json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("after the replays the server lists %s (exit %d), want no job", out, code)
	}
}

// chown gives path to the user name.
func chown(t *testing.T, path, name string) {
	t.Helper()
	if out, err := exec.Command("chown", name, path).CombinedOutput(); err != nil {
		t.Fatalf("chown %s %s: %v\n%s", name, path, err, out)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, out fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within 30s:\n%s", path, out)
}

// replayRaw sends a recorded request, byte for byte, and returns the answer's status.
func replayRaw(t *testing.T, addr string, raw []byte) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
