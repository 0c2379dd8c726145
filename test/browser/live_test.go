package browser

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// burstScript waits for the file named by its argument, then prints 20,000 lines as fast
// as it can, each with a word in red (ANSI SGR) and markup that must stay text, then
// "all printed", and waits to be stopped.
const burstScript = `import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
for i in range(1, 20001):
    sys.stdout.write("line %d \x1b[31mred\x1b[0m <img src=x onerror=alert(1)>\n" % i)
sys.stdout.write("all printed\n")
sys.stdout.flush()
time.sleep(600)
`

// The live log appends what arrives and keeps 5,000 lines at most in the page, scrolled
// to its end; ANSI colours are drawn, markup stays text, each live line has the time it
// arrived, and the filter hides the other lines. The job list refreshes by itself while
// one of its jobs runs: a job that ends is shown ended without a reload; once none runs,
// it stops refreshing.
func TestLiveLogAndListRefresh(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("Chromium is missing (neither /usr/bin/chromium nor chromium on PATH): install Debian's package chromium to run the browser test")
	}
	s := startServer(t, bin)
	trigger, end := filepath.Join(t.TempDir(), "go"), filepath.Join(t.TempDir(), "end")
	burst := s.submit(t, "burst", "/usr/bin/python3", "-c", burstScript, trigger)
	short := s.submit(t, "short", "sh", "-c", "while [ ! -e "+end+" ]; do sleep 0.2; done") // ends when the test says
	s.waitStatus(t, burst, "RUNNING")
	s.waitStatus(t, short, "RUNNING")

	ctx := newBrowser(t, chromium)
	signInWith(t, ctx, s.link(t), s.url+"/")
	checkRows(t, ctx, "the running jobs", map[string]string{burst: "running", short: "running"})
	if err := os.WriteFile(end, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "the short job's row to say succeeded, without a reload", func() (bool, error) {
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(
			[...document.querySelectorAll("table#jobs tr[data-id]")].map((r) => [r.dataset.id, r.querySelector("span.status").textContent.trim()]))`))
		return err == nil && rows[short] == "succeeded" && rows[burst] == "running", fmt.Errorf("rows %v (%v)", rows, err)
	})

	do(t, ctx, "open the burst's page", chromedp.Navigate(s.url+"/jobs/"+burst))
	poll(t, 30*time.Second, "the page's log stream to open", func() (bool, error) {
		live, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("log").dataset.live`))
		return err == nil && live == "true", fmt.Errorf("pre#log data-live %q (%v)", live, err)
	})
	time.Sleep(time.Second) // the stream's first message, the page's last lines again
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var last string
	poll(t, time.Minute, `the log's last line to be "all printed"`, func() (bool, error) {
		var err error
		last, err = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("pre#log").lastElementChild || {}).textContent || ""`))
		return err == nil && strings.HasSuffix(last, "all printed\n"), fmt.Errorf("last line %q (%v)", last, err)
	})
	type logState struct {
		Lines, Red, Images int
		Escapes, Markup    bool
		AtEnd              bool
		Time               string
	}
	got := run(t, ctx, "read the log box", chromedp.Evaluate[logState](`(() => {
		const pre = document.querySelector("pre#log");
		const text = pre.textContent;
		return {
			Lines: pre.querySelectorAll(".line").length,
			Red: [...pre.querySelectorAll(".line .ansi-fg1")].filter((e) => e.textContent === "red").length,
			Images: pre.querySelectorAll("img").length,
			Escapes: text.includes("\x1b"),
			Markup: text.includes("<img src=x onerror=alert(1)>"),
			AtEnd: pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 2,
			Time: pre.lastElementChild.dataset.t || "",
		};
	})()`))
	if got.Lines != 5000 {
		t.Errorf("the log box holds %d lines after 20,001 arrived, want 5000 (its bound)", got.Lines)
	}
	if got.Red < 4000 || got.Escapes {
		t.Errorf("%d lines show \"red\" in span.ansi-fg1, escapes left in the text: %v; want the colour drawn, no escapes", got.Red, got.Escapes)
	}
	if got.Images != 0 || !got.Markup {
		t.Errorf("the log box has %d img elements (markup as text: %v); want the markup as text", got.Images, got.Markup)
	}
	if !got.AtEnd {
		t.Error("the log box is not scrolled to its end while follow is checked")
	}
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d$`).MatchString(got.Time) {
		t.Errorf("the last line arrived at %q, want a time of day", got.Time)
	}
	shown := run(t, ctx, "show arrival times", chromedp.Evaluate[string](`(() => {
		document.getElementById("log-times").click();
		return getComputedStyle(document.querySelector("pre#log").lastElementChild, "::before").content;
	})()`))
	if !strings.Contains(shown, got.Time) {
		t.Errorf("with arrival times shown, the last line starts with %s, want %q", shown, got.Time)
	}
	do(t, ctx, "filter the lines", chromedp.SendKeys(chromedp.ID("log-filter"), "all printed"))
	visible := run(t, ctx, "count the lines shown", chromedp.Evaluate[int](`[...document.querySelectorAll("pre#log .line")].filter((e) => !e.hidden).length`))
	if visible != 1 {
		t.Errorf("filtered on \"all printed\", %d lines are shown, want 1", visible)
	}

	// Once no job on the list runs, the list stops refreshing.
	do(t, ctx, "open the job list", chromedp.Navigate(s.url+"/"))
	if _, err := s.cli("stop", burst); err != nil {
		t.Fatal(err)
	}
	var refreshes int
	poll(t, time.Minute, "the burst's row to say stopped, without a reload", func() (bool, error) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[
			document.querySelector("table#jobs tr[data-id='`+burst+`'] span.status").textContent.trim() === "stopped" ? 1 : 0,
			window.trainyardListRefreshes || 0]`))
		if err != nil {
			return false, err
		}
		refreshes = got[1]
		return got[0] == 1, fmt.Errorf("not stopped yet after %d refreshes", got[1])
	})
	time.Sleep(12 * time.Second) // more than twice the list's shortest wait
	if n := run(t, ctx, "count the refreshes", chromedp.Evaluate[int](`window.trainyardListRefreshes || 0`)); n != refreshes {
		t.Errorf("the list refreshed %d more times after no job on it ran, want none", n-refreshes)
	}
}
