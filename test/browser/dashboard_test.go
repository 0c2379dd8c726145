// Package browser tests the web dashboard of `trainyard server` end to end: the real
// binary serves it, and Debian's headless Chromium (/usr/bin/chromium), driven by
// chromedp, signs in, filters the job list, watches a job's log arrive live over the
// WebSocket and stops the job. The browser test skips when Chromium is missing; CI
// installs it. Set TRAINYARD_SCREENSHOTS to a folder to keep screenshots of the pages.
package browser

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/testbinary"
)

var bin string

func TestMain(m *testing.M) { testbinary.Main(m, &bin) }

// tickerCommand prints "tick N" twice a second until it is stopped.
var tickerCommand = []string{"sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.5; done"}

// A user signs in with Chromium, filters and searches the job list, watches a running
// job's log grow live, stops the job and deletes it.
func TestDashboardInChromium(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("Chromium is missing (neither /usr/bin/chromium nor chromium on PATH): install Debian's package chromium to run the browser test")
	}
	s := startServer(t, bin)
	ticker := s.submit(t, "ticker", tickerCommand...)
	quick := s.submit(t, "quick", "sh", "-c", "echo done")
	s.waitStatus(t, quick, "SUCCEEDED")
	s.waitStatus(t, ticker, "RUNNING")

	ctx := newBrowser(t, chromium)

	// Signed out, / sends the browser to the sign-in page, which asks for no token over
	// plain HTTP; a link whose code is not the server's is refused.
	do(t, ctx, "open /", chromedp.Navigate(s.url+"/"))
	if loc := location(t, ctx); !strings.HasPrefix(loc, s.url+"/login") {
		t.Fatalf("signed out, / went to %s, want the sign-in page", loc)
	}
	if n := run(t, ctx, "count token fields", chromedp.Evaluate[int](`document.querySelectorAll("input[name=token]").length`)); n != 0 {
		t.Errorf("the sign-in page over plain HTTP has %d token fields, want none", n)
	}
	do(t, ctx, "open a made-up sign-in link", chromedp.Navigate(s.url+"/login#code=madeupmadeupmadeup"))
	var msg string
	poll(t, 30*time.Second, "the made-up link to be refused", func() (bool, error) {
		m, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("p#login-error") || {}).textContent || ""`))
		msg = m
		return m != "", err
	})
	if !strings.Contains(msg, "used already or has expired") {
		t.Errorf("p#login-error says %q, want that the link was used or expired", msg)
	}
	screenshot(t, ctx, "login.png")

	// A link from 'trainyard open' opens the job list, with both jobs; it works once.
	link := s.link(t)
	signInWith(t, ctx, link, s.url+"/")
	if _, _, err := s.signIn(strings.TrimPrefix(link, s.url+"/login#code=")); err == nil {
		t.Error("a sign-in link worked twice")
	}
	checkRows(t, ctx, "the job list", map[string]string{ticker: "running", quick: "succeeded"})
	who := run(t, ctx, "read who submitted", chromedp.Text(chromedp.CSS(`#jobs tr[data-id="`+ticker+`"] td.who`)))
	if want := client.Submitter() + " from 127.0.0.1"; who != want {
		t.Errorf("the job list's By column says %q, want %q (the CLI's user@host and address)", who, want)
	}
	screenshot(t, ctx, "jobs.png")

	// The status filter and the search narrow it.
	load(t, ctx, "filter by status RUNNING",
		chromedp.SetValue(chromedp.ID("status"), "RUNNING"), chromedp.Submit(chromedp.ID("status")))
	checkRows(t, ctx, "the RUNNING jobs", map[string]string{ticker: "running"})
	load(t, ctx, `search "quick"`, chromedp.SetValue(chromedp.ID("status"), ""),
		chromedp.SendKeys(chromedp.ID("search"), "quick"), chromedp.Submit(chromedp.ID("search")))
	checkRows(t, ctx, `the jobs that match "quick"`, map[string]string{quick: "succeeded"})

	// The ticker's page: its log grows live, over the WebSocket, with no reload.
	do(t, ctx, "open the job list", chromedp.Navigate(s.url+"/"))
	load(t, ctx, "open the ticker's page", chromedp.Click(chromedp.CSS(`#jobs tr[data-id="`+ticker+`"] a`)))
	if loc := location(t, ctx); loc != s.url+"/jobs/"+ticker {
		t.Fatalf("the ticker's link went to %s, want %s/jobs/%s", loc, s.url, ticker)
	}
	first := run(t, ctx, "read pre#log", chromedp.TextContent(chromedp.CSS("pre#log")))
	before := lastTick(first)
	var log string
	poll(t, 30*time.Second, fmt.Sprintf("pre#log to show a tick after tick %d without a reload", before), func() (bool, error) {
		var err error
		log, err = chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("pre#log")))
		return err == nil && lastTick(log) > before, err
	})
	t.Logf("pre#log showed tick %d at first, then tick %d live", before, lastTick(log))
	if !regexp.MustCompile(`(?m)^\[rank 0 pid \d+\] tick \d+$`).MatchString(log) {
		t.Errorf("pre#log has no line like %q:\n%s", "[rank 0 pid N] tick 7", log)
	}
	screenshot(t, ctx, "job.png")

	// Stop, confirmed in the page's dialog: the job ends STOPPED.
	dialogs := acceptDialogs(ctx)
	resp := load(t, ctx, "click Stop", chromedp.Click(chromedp.ID("stop")))
	select {
	case d := <-dialogs:
		if d.err != nil || d.message != "Stop this job?" {
			t.Errorf("the Stop dialog said %q (accept: %v), want %q", d.message, d.err, "Stop this job?")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("clicking Stop opened no dialog")
	}
	if loc := location(t, ctx); resp.Status != http.StatusOK || loc != s.url+"/jobs/"+ticker {
		t.Errorf("Stop ended at %s with %d, want the job's page with 200", loc, resp.Status)
	}
	// The page follows the job's status by itself (no reload): it says "stopped", and
	// Delete takes Stop's place.
	poll(t, time.Minute, `span#job-status to say "stopped", and button#delete to replace Stop, without a reload`, func() (bool, error) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.getElementById("job-status").textContent,
			String(document.getElementById("stop-form") === null), String(document.getElementById("delete") !== null)]`))
		return err == nil && cmp.Equal(got, []string{"stopped", "true", "true"}), fmt.Errorf("status, no Stop, Delete: %v (%v)", got, err)
	})
	s.waitStatus(t, ticker, "STOPPED")

	// An ended job has Delete, confirmed in a dialog: the job list follows, without the job.
	resp = load(t, ctx, "click Delete", chromedp.Click(chromedp.ID("delete")))
	select {
	case d := <-dialogs:
		if want := "Delete this job and its record? Its run folder stays."; d.err != nil || d.message != want {
			t.Errorf("the Delete dialog said %q (accept: %v), want %q", d.message, d.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("clicking Delete opened no dialog")
	}
	if loc := location(t, ctx); resp.Status != http.StatusOK || loc != s.url+"/" {
		t.Errorf("Delete ended at %s with %d, want the job list with 200", loc, resp.Status)
	}
	checkRows(t, ctx, "the jobs after the delete", map[string]string{quick: "succeeded"})
	if jobs, err := s.jobs(); err != nil || len(jobs) != 1 {
		t.Errorf("after Delete the server lists %v (%v), want the quick job alone", jobs, err)
	}

	// Sign out: / sends the browser to the sign-in page again.
	load(t, ctx, "sign out", chromedp.Click(chromedp.ID("logout")))
	do(t, ctx, "open / signed out", chromedp.Navigate(s.url+"/"))
	if loc := location(t, ctx); !strings.HasPrefix(loc, s.url+"/login") {
		t.Errorf("after signing out, / went to %s, want the sign-in page", loc)
	}
}

// The dashboard refuses a stop without its CSRF token and a foreign Host, and its
// session cookie is HttpOnly and SameSite=Strict. No browser: plain HTTP requests.
func TestDashboardRefusals(t *testing.T) {
	s := startServer(t, bin)
	ticker := s.submit(t, "ticker", tickerCommand...)
	s.waitStatus(t, ticker, "RUNNING")

	resp, session, err := s.signIn(strings.TrimPrefix(s.link(t), s.url+"/login#code="))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("POST /login with a link's code answered %s, want 303", resp.Status)
	}
	if want := "trainyard_session_" + s.url[strings.LastIndexByte(s.url, ':')+1:]; session.Name != want {
		t.Errorf("the session cookie is %s, want %s (one per port)", session.Name, want)
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" {
		t.Errorf("the session cookie is HttpOnly=%v SameSite=%v Path=%q, want HttpOnly, SameSite=Strict, Path=/; Set-Cookie: %s",
			session.HttpOnly, session.SameSite, session.Path, resp.Header.Get("Set-Cookie"))
	}

	send := func(method, path, host string) int {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if host != "" {
			req.Host = host
		}
		req.AddCookie(session)
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send("GET", "/", ""); code != http.StatusOK {
		t.Fatalf("GET / with the session cookie answered %d, want 200", code)
	}
	if code := send("POST", "/jobs/"+ticker+"/stop", ""); code != http.StatusForbidden {
		t.Errorf("POST /jobs/%s/stop with the session cookie and no CSRF token answered %d, want 403", ticker, code)
	}
	if code := send("POST", "/jobs/"+ticker+"/delete", ""); code != http.StatusForbidden {
		t.Errorf("POST /jobs/%s/delete with the session cookie and no CSRF token answered %d, want 403", ticker, code)
	}
	// With its CSRF token, deleting a running job is refused, saying why.
	req, _ := http.NewRequest("GET", s.url+"/jobs/"+ticker, nil)
	req.AddCookie(session)
	resp, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`).FindSubmatch(body)
	if csrf == nil {
		t.Fatalf("no CSRF token on the job's page:\n%s", body)
	}
	req, _ = http.NewRequest("POST", s.url+"/jobs/"+ticker+"/delete", strings.NewReader(url.Values{"csrf": {string(csrf[1])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(session)
	if resp, err = noRedirects.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "stop it first") {
		t.Errorf("deleting the running ticker answered %s, want 409 saying to stop it first:\n%s", resp.Status, body)
	}
	if code := send("GET", "/", "evil.example"); code != http.StatusForbidden {
		t.Errorf("GET / with Host: evil.example answered %d, want 403", code)
	}
	if _, _, err := s.signIn("not-a-code"); err == nil {
		t.Errorf("POST /login with a made-up code set a session cookie")
	}
	if resp, err := noRedirects.PostForm(s.url+"/login", url.Values{"token": {s.token}}); err != nil ||
		resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("POST /login with the token over plain HTTP: %v %v, want 403 and no session", resp, err)
	}
	if jobs, err := s.jobs(); err != nil || jobs[ticker].Status != "RUNNING" {
		t.Errorf("after the refused stop the ticker is %q (%v), want RUNNING", jobs[ticker].Status, err)
	}
}

// newBrowser starts headless Chromium for the test and returns its tab's context,
// which ends after 2 minutes at most. Chromium's output is logged if the test fails.
func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	out, err := os.Create(filepath.Join(t.TempDir(), "chromium.log"))
	if err != nil {
		t.Fatalf("create chromium.log: %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.CombinedOutput(out))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	tab, tcancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		tcancel()
		acancel()
		cancel()
		out.Close()
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("Chromium's output:\n%s", log)
		}
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium %s: %v", chromium, err)
	}
	return tab
}

// do runs the steps in the browser and fails the test on an error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// run runs an action that returns a value in the browser and fails the test on an error.
func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// load runs steps that make the page load another (a click, a form's submit), waits
// until it has loaded and returns the response of its document.
func load(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) *network.Response {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, steps...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return resp
}

// location returns the page's URL.
func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	return run(t, ctx, "read the location", chromedp.Location())
}

// checkRows checks the job list's rows (job ID to the text of its span.status), and
// that small#job-count starts with their number.
func checkRows(t *testing.T, ctx context.Context, what string, want map[string]string) {
	t.Helper()
	rows := run(t, ctx, "read "+what, chromedp.Evaluate[map[string]string](`Object.fromEntries(
		[...document.querySelectorAll("table#jobs tr[data-id]")].map((r) => [r.dataset.id, r.querySelector("span.status").textContent.trim()]))`))
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("%s: rows (ID: status) differ (-want +got):\n%s", what, diff)
	}
	count := run(t, ctx, "read small#job-count", chromedp.Text(chromedp.CSS("small#job-count")))
	if n := strconv.Itoa(len(want)); count != n && !strings.HasPrefix(count, n+" ") {
		t.Errorf("%s: small#job-count says %q, want %s", what, count, n)
	}
}

var tickRE = regexp.MustCompile(`tick (\d+)`)

// lastTick returns the largest N of the "tick N" lines of a log, 0 if none.
func lastTick(log string) int {
	most := 0
	for _, m := range tickRE.FindAllStringSubmatch(log, -1) {
		if n, _ := strconv.Atoi(m[1]); n > most {
			most = n
		}
	}
	return most
}

// dialog is a JavaScript dialog that acceptDialogs accepted.
type dialog struct {
	message string
	err     error // of accepting it
}

// acceptDialogs accepts every JavaScript dialog (confirm, alert) the page opens from
// now on, and sends each on the channel it returns, while there is room.
func acceptDialogs(ctx context.Context) <-chan dialog {
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	dialogs := make(chan dialog, 10)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			_, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			select {
			case dialogs <- dialog{message: ev.Message, err: err}:
			default:
			}
		}
	}()
	return dialogs
}

// screenshot saves a full-page PNG of the page as $TRAINYARD_SCREENSHOTS/name, when
// that variable names a folder; otherwise it does nothing.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TRAINYARD_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
}
