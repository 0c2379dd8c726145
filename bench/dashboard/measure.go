package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
)

// figure is one measured figure: the median of its samples, and its peer's.
type figure struct {
	name, peerName string
	value, peer    time.Duration
	detail         string
}

// median returns the median of d.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// timeGets measures GET path cfg.repeat times (after one warm-up) and returns the median.
func timeGets(s *serverProc, path string, api bool, repeat int) (time.Duration, int64, error) {
	if _, _, err := s.get(path, api); err != nil {
		return 0, 0, err
	}
	var d []time.Duration
	var size int64
	for range repeat {
		took, n, err := s.get(path, api)
		if err != nil {
			return 0, 0, err
		}
		d, size = append(d, took), n
	}
	return median(d), size, nil
}

// measureServer times the dashboard's pages on the server, each against its peer.
func measureServer(_ context.Context, s *serverProc, big string, cfg config) ([]figure, error) {
	api := "/api/v1/jobs?limit=50&offset=0&sort=newest"
	peer, _, err := timeGets(s, api, true, cfg.repeat)
	if err != nil {
		return nil, err
	}
	middle := fmt.Sprintf("/?page=%d", max(1, cfg.jobs/50/2))
	pages := []struct{ name, path string }{
		{"job list, page 1", "/"},
		{"job list, a middle page (" + middle + ")", middle},
		{`job list, search "failed"`, "/?q=failed"},
	}
	var out []figure
	for _, p := range pages {
		d, size, err := timeGets(s, p.path, false, cfg.repeat)
		if err != nil {
			return nil, err
		}
		out = append(out, figure{name: p.name, value: d, peerName: "GET " + api + " (the API's page alone)", peer: peer,
			detail: fmt.Sprintf("%d KiB", size>>10)})
	}
	logPage, size, err := timeGets(s, "/jobs/"+big, false, cfg.repeat)
	if err != nil {
		return nil, err
	}
	whole, wsize, err := timeGets(s, "/jobs/"+big+"/log", false, cfg.repeat)
	if err != nil {
		return nil, err
	}
	out = append(out, figure{name: fmt.Sprintf("page of a job with a %d-line log", cfg.logLines), value: logPage,
		peerName: "the whole log as text (/log, its last 16 MiB)", peer: whole,
		detail: fmt.Sprintf("%d KiB against %d KiB", size>>10, wsize>>10)})
	thin, tsize, err := timeGets(s, "/jobs/"+big+"/results.json", false, cfg.repeat)
	if err != nil {
		return nil, err
	}
	all, asize, err := timeGets(s, fmt.Sprintf("/jobs/%s/results.json?max=%d", big, cfg.points), false, cfg.repeat)
	if err != nil {
		return nil, err
	}
	out = append(out, figure{name: fmt.Sprintf("results of %d reports, every one", cfg.points), value: all,
		peerName: "thinned to the default 5,000", peer: thin, detail: fmt.Sprintf("%d KiB against %d KiB", asize>>10, tsize>>10)})
	return out, nil
}

// browser is a headless Chromium signed in to the dashboard.
type browser struct {
	ctx    context.Context
	cancel func()
}

func newBrowser(ctx context.Context, s *serverProc, chromium string) (*browser, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	tab, tcancel := chromedp.NewContext(actx)
	b := &browser{ctx: tab, cancel: func() { tcancel(); acancel() }}
	link, err := s.link(ctx)
	if err == nil { // the page posts the link's code and goes to the job list
		err = chromedp.Do(tab, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("jobs")))
	}
	if err == nil {
		_, err = chromedp.Call(tab, performance.Enable, performance.EnableParams{})
	}
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("sign in with Chromium: %w", err)
	}
	return b, nil
}

// load navigates to url and returns the page's load time (navigation start to the load
// event's end, from the Navigation Timing API) and its JavaScript heap after a GC.
func (b *browser) load(url string) (time.Duration, float64, error) {
	if err := chromedp.Do(b.ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url)); err != nil {
		return 0, 0, fmt.Errorf("open %s: %w", url, err)
	}
	ms, err := b.until(`(() => { const n = performance.getEntriesByType("navigation")[0]; return n && n.loadEventEnd > 0 ? n.loadEventEnd : 0; })()`)
	if err != nil {
		return 0, 0, fmt.Errorf("time the load of %s: %w", url, err)
	}
	heap, err := b.heap()
	if err != nil {
		return 0, 0, fmt.Errorf("measure the heap of %s: %w", url, err)
	}
	return time.Duration(ms * float64(time.Millisecond)), heap, nil
}

// until evaluates expr every 10 ms until it is not 0 (2 minutes at most) and returns
// it: a time the page itself took (performance.now()), so the polling adds nothing.
func (b *browser) until(expr string) (float64, error) {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](expr))
		if err == nil && v > 0 {
			return v, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s is still 0 after 2 minutes (%v)", expr, err)
		}
	}
}

// heap returns the page's JavaScript heap in use after a garbage collection, in MiB.
func (b *browser) heap() (float64, error) {
	if _, err := chromedp.Call(b.ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return 0, err
	}
	m, err := chromedp.Call(b.ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return 0, err
	}
	for _, x := range m.Metrics {
		if x.Name == "JSHeapUsedSize" {
			return x.Value / (1 << 20), nil
		}
	}
	return 0, fmt.Errorf("Chromium reported no JSHeapUsedSize")
}

// curves navigates to a job's page and returns the time from navigation start to its
// curves drawn (window.trainyardCurvesDrawn, set by app.js).
func (b *browser) curves(url string) (time.Duration, error) {
	if err := chromedp.Do(b.ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url)); err != nil {
		return 0, fmt.Errorf("open %s: %w", url, err)
	}
	ms, err := b.until(`window.trainyardCurvesDrawn || 0`)
	if err != nil {
		return 0, fmt.Errorf("wait for the curves of %s: %w", url, err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// measureBrowser measures page loads, heaps and curve drawing in Chromium.
func measureBrowser(ctx context.Context, s *serverProc, big string, cfg config) ([]figure, error) {
	if _, err := os.Stat(cfg.chromium); err != nil {
		return nil, fmt.Errorf("Chromium %s: %w (install Debian's chromium, or give -chromium)", cfg.chromium, err)
	}
	b, err := newBrowser(ctx, s, cfg.chromium)
	if err != nil {
		return nil, err
	}
	defer b.cancel()
	repeat := func(f func() (time.Duration, float64, error)) (time.Duration, float64, error) {
		var d []time.Duration
		var heap float64
		for i := range cfg.repeat + 1 {
			took, h, err := f()
			if err != nil {
				return 0, 0, err
			}
			if i > 0 { // the first is a warm-up
				d, heap = append(d, took), max(heap, h)
			}
		}
		return median(d), heap, nil
	}
	login, _, err := repeat(func() (time.Duration, float64, error) { return b.load(s.url + "/login") })
	if err != nil {
		return nil, err
	}
	list, listHeap, err := repeat(func() (time.Duration, float64, error) { return b.load(s.url + "/") })
	if err != nil {
		return nil, err
	}
	logPage, logHeap, err := repeat(func() (time.Duration, float64, error) { return b.load(s.url + "/jobs/" + big) })
	if err != nil {
		return nil, err
	}
	raw, rawHeap, err := repeat(func() (time.Duration, float64, error) { return b.load(s.url + "/jobs/" + big + "/log") })
	if err != nil {
		return nil, err
	}
	all, _, err := repeat(func() (time.Duration, float64, error) {
		d, err := b.curves(fmt.Sprintf("%s/jobs/%s?points=%d", s.url, big, cfg.points))
		return d, 0, err
	})
	if err != nil {
		return nil, err
	}
	allHeap, err := b.heap()
	if err != nil {
		return nil, err
	}
	thin, _, err := repeat(func() (time.Duration, float64, error) {
		d, err := b.curves(s.url + "/jobs/" + big)
		return d, 0, err
	})
	if err != nil {
		return nil, err
	}
	return []figure{
		{name: fmt.Sprintf("job list of %d jobs, loaded", cfg.jobs), value: list, peerName: "the sign-in page", peer: login,
			detail: fmt.Sprintf("JS heap %.1f MiB", listHeap)},
		{name: fmt.Sprintf("job with a %d-line log, loaded (its last 500 lines, then live)", cfg.logLines), value: logPage,
			peerName: "the whole log as text in the browser (16 MiB)", peer: raw,
			detail: fmt.Sprintf("JS heap %.1f MiB against %.1f MiB", logHeap, rawHeap)},
		{name: fmt.Sprintf("curves of %d points, drawn", cfg.points), value: all, peerName: "the default, thinned to 5,000",
			peer: thin, detail: fmt.Sprintf("JS heap %.1f MiB", allHeap)},
	}, nil
}

// report is what a run measured.
type report struct {
	cfg                   config
	machine               string
	seeded                time.Duration
	server, browser, live []figure
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// print writes the report as a Markdown table, to w and to markdown if set.
func (r report) print(w *os.File, markdown string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Dashboard, %d jobs, a %d-line log, %d results; median of %d; %s; seeding took %s.\n\n",
		r.cfg.jobs, r.cfg.logLines, r.cfg.points, r.cfg.repeat, r.machine, r.seeded.Round(time.Second))
	fmt.Fprintln(&b, "| where | what | time | peer | peer's time | ratio | notes |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|")
	for _, part := range []struct {
		where string
		figs  []figure
	}{{"server", r.server}, {"Chromium", r.browser}, {"Chromium", r.live}} {
		for _, f := range part.figs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2f | %s |\n", part.where, f.name, ms(f.value), f.peerName, ms(f.peer),
				float64(f.value)/float64(f.peer), f.detail)
		}
	}
	fmt.Fprint(w, b.String())
	if markdown == "" {
		return nil
	}
	return os.WriteFile(filepath.Clean(markdown), []byte(b.String()), 0o644)
}
