package browser

import (
	"bufio"
	"context"
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

// checkpointer runs on 2 ranks: each prints 100 lines of its own, and together they
// report 90 times with a checkpoint each.
const checkpointer = `import os, trainyard
rank = os.environ["RANK"]
for i in range(100):
    print("rank", rank, "says", i, flush=True)
for i in range(90):
    d = trainyard.new_checkpoint_dir()
    if rank == "0":
        open(os.path.join(d, "model"), "w").write(str(i))
    trainyard.report({"loss": 1 / (1 + i)}, checkpoint=d)
`

// The dashboard of local runs (trainyard dashboard STORAGE): runs that trainyard run wrote
// are listed with their status, a running run's log, curve and last result grow live, and
// the pages are read-only (no Stop). A finished run's page shows every rank's console
// lines, with their prefixes, scrolled to the end, and its 90 checkpoints in a box of
// bounded height. The dashboard keeps its token from one start to the next.
func TestLocalDashboardInChromium(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("Chromium is missing (neither /usr/bin/chromium nor chromium on PATH): install Debian's package chromium to run the browser test")
	}
	dir := t.TempDir()
	storage := filepath.Join(dir, "runs")
	finished := exec.Command(bin, "run", "--storage-path", storage, "--name", "lr-small", "--workers", "2", "--",
		"/usr/bin/python3", "-c", checkpointer)
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
	tokenFile := filepath.Join(dir, "dashboard-token")
	token0, err := os.ReadFile(tokenFile)
	if st, serr := os.Stat(tokenFile); err != nil || serr != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the dashboard's token file: %v, %v (want it made with mode 0600)", err, serr)
	}
	startDashboard(t, dir, storage) // a second start, beside the first
	if again, err := os.ReadFile(tokenFile); err != nil || string(again) != string(token0) {
		t.Errorf("the dashboard's token changed from one start to the next (%v)", err)
	}
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

	checkFinishedRun(t, ctx, url, small)
	do(t, ctx, "open the job list", chromedp.Navigate(url+"/"))
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

// checkFinishedRun checks the page of the finished run of checkpointer: its log is the
// console's (both ranks' lines, prefixed) opened at its end, and its checkpoints do not push
// the curves and the log down the page.
func checkFinishedRun(t *testing.T, ctx context.Context, url, id string) {
	t.Helper()
	do(t, ctx, "open the finished run's page", chromedp.Navigate(url+"/jobs/"+id))
	type state struct {
		Rank0, Rank1, AtEnd, Overflows bool
		Checkpoints                    int
		BoxHeight, LogTop              float64
	}
	var got state
	poll(t, 30*time.Second, "the finished run's page", func() (bool, error) {
		var err error
		got, err = chromedp.Run(ctx, chromedp.Evaluate[state](`(() => {
			const pre = document.querySelector("pre#log"), box = document.getElementById("checkpoints-box");
			const text = pre.textContent;
			return {
				Rank0: /^\[rank 0 pid \d+\] rank 0 says 99$/m.test(text),
				Rank1: /^\[rank 1 pid \d+\] rank 1 says 99$/m.test(text),
				AtEnd: pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 2,
				Overflows: pre.scrollHeight > pre.clientHeight,
				Checkpoints: box ? box.querySelectorAll("tr[data-checkpoint]").length : 0,
				BoxHeight: box ? box.getBoundingClientRect().height : 0,
				LogTop: pre.getBoundingClientRect().top + window.scrollY,
			};
		})()`))
		return err == nil && got.Checkpoints > 0, err
	})
	if !got.Rank0 || !got.Rank1 {
		t.Errorf("the console log shows rank 0's last line: %v, rank 1's: %v; want both, with their [rank N pid P] prefixes", got.Rank0, got.Rank1)
	}
	if !got.Overflows || !got.AtEnd {
		t.Errorf("the log overflows its box: %v, is scrolled to its end: %v; want it opened at its end", got.Overflows, got.AtEnd)
	}
	if got.Checkpoints != 90 || got.BoxHeight > 300 {
		t.Errorf("%d checkpoints in a box %.0f px high, want 90 in at most 300 px (16rem)", got.Checkpoints, got.BoxHeight)
	}
	if got.LogTop > 2500 {
		t.Errorf("the log starts %.0f px down the page, want it within 2,500 px", got.LogTop)
	}
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
	cmd.Env = append(os.Environ(), "TRAINYARD_DASHBOARD_TOKEN_FILE="+filepath.Join(dir, "dashboard-token"))
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
