package browser

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tickingReporter prints "tick N" and reports a loss twice a second, forever.
const tickingReporter = `import time, trainyard
i = 0
while True:
    i += 1
    print("tick", i, flush=True)
    trainyard.report({"loss": 1.0 / i})
    time.sleep(0.5)
`

// The dashboard of local runs (trainyard dashboard STORAGE): runs that trainyard run wrote
// are listed with their status, a running run's log, curve and last result grow live, and
// the pages are read-only (no Stop).
func TestLocalDashboardInChromium(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("Chromium is missing (neither /usr/bin/chromium nor chromium on PATH): install Debian's package chromium to run the browser test")
	}
	dir := t.TempDir()
	storage := filepath.Join(dir, "runs")
	finished := exec.Command(bin, "run", "--storage-path", storage, "--name", "lr-small", "--",
		"/usr/bin/python3", "-c", "import trainyard\nfor i in range(20): trainyard.report({'loss': 1/(1+i)})")
	finished.Dir = dir
	if out, err := finished.CombinedOutput(); err != nil {
		t.Fatalf("trainyard run lr-small: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "ticker.py")
	if err := os.WriteFile(script, []byte(tickingReporter), 0o644); err != nil {
		t.Fatal(err)
	}
	background(t, dir, "run", "--storage-path", storage, "--name", "live", "--", "/usr/bin/python3", script)
	var ids map[string]string // run folder: its job's name
	poll(t, time.Minute, "both runs' folders", func() (bool, error) {
		ids = runFolders(storage)
		return len(ids) == 2, fmt.Errorf("run folders %v", ids)
	})
	live, small := "", ""
	for id, name := range ids {
		if name == "live" {
			live = id
		} else {
			small = id
		}
	}

	url, link := startDashboard(t, dir, storage)
	ctx := newBrowser(t, chromium)
	signInWith(t, ctx, link, url+"/")
	poll(t, 30*time.Second, "the live run to be listed as running", func() (bool, error) {
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(
			[...document.querySelectorAll("table#jobs tr[data-id]")].map((r) => [r.dataset.id, r.querySelector("span.status").textContent.trim()]))`))
		if err == nil && rows[live] == "running" && rows[small] == "succeeded" {
			return true, nil
		}
		_ = chromedp.Do(ctx, chromedp.Reload())
		return false, fmt.Errorf("rows %v, err %v", rows, err)
	})
	checkRows(t, ctx, "the runs", map[string]string{live: "running", small: "succeeded"})

	load(t, ctx, "open the live run's page", chromedp.Click(chromedp.CSS(`#jobs tr[data-id="`+live+`"] a`)))
	first := run(t, ctx, "read pre#log", chromedp.TextContent(chromedp.CSS("pre#log")))
	before := lastTick(first)
	poll(t, 30*time.Second, fmt.Sprintf("pre#log to show a tick after tick %d without a reload", before), func() (bool, error) {
		log, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("pre#log")))
		return err == nil && lastTick(log) > before, err
	})
	lastResult := func() (int, error) {
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("last-result")))
		if err != nil {
			return 0, err
		}
		var it int
		if _, err := fmt.Sscanf(text, "iteration %d: loss=", &it); err != nil {
			return 0, fmt.Errorf("dd#last-result says %q: %w", text, err)
		}
		return it, nil
	}
	var n0 int
	poll(t, 30*time.Second, "the live run's curve", func() (bool, error) {
		n, err := points(ctx)
		n0 = n
		return err == nil && n > 0, err
	})
	it0, err := lastResult()
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, fmt.Sprintf("the curve to gain points after %d", n0), func() (bool, error) {
		n, err := points(ctx)
		return err == nil && n > n0, err
	})
	poll(t, 30*time.Second, fmt.Sprintf("the Last result field to pass iteration %d", it0), func() (bool, error) {
		it, err := lastResult()
		return err == nil && it > it0, err
	})
	if gone := run(t, ctx, "look for form#stop-form", chromedp.Evaluate[bool](`document.getElementById("stop-form") === null`)); !gone {
		t.Errorf("the read-only dashboard of local runs offers Stop")
	}
	screenshot(t, ctx, "local-run.png")
}

// background starts trainyard with args in dir and interrupts it (as ^C does) at the
// test's end.
func background(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	log, err := os.Create(filepath.Join(dir, "trainyard-"+args[0]+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start trainyard %s: %v", args[0], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("trainyard %s did not exit within 30s of SIGINT", args[0])
		}
		log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("trainyard %s's output:\n%s", args[0], out)
		}
	})
}

// runFolders returns the folders of storage that hold a run (run.json), with the job
// name each records.
func runFolders(storage string) map[string]string {
	out := map[string]string{}
	entries, _ := os.ReadDir(storage)
	nameRE := regexp.MustCompile(`"name":\s*"([^"]*)"`)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(storage, e.Name(), "run.json"))
		if err != nil {
			continue
		}
		if m := nameRE.FindSubmatch(data); m != nil {
			out[e.Name()] = string(m[1])
		}
	}
	return out
}

// startDashboard starts trainyard dashboard on storage, on a free loopback port, and
// returns its address and the sign-in link it printed.
func startDashboard(t *testing.T, dir, storage string) (url, link string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "dashboard", storage, "--address", addr)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start trainyard dashboard: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	linkRE := regexp.MustCompile(`sign in: (http://\S+/login#code=[A-Za-z0-9_-]+)`)
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "token") {
			t.Errorf("trainyard dashboard printed a token: %s", lines.Text())
		}
		if m := linkRE.FindStringSubmatch(lines.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return "http://" + addr, m[1]
		}
		if !strings.HasPrefix(lines.Text(), "trainyard dashboard of "+storage) {
			t.Logf("trainyard dashboard: %s", lines.Text())
		}
	}
	t.Fatalf("trainyard dashboard printed no sign-in link: %v", lines.Err())
	return "", ""
}
