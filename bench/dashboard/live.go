package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/websocket"
)

// liveScript prints argv[1] lines a second for argv[2] seconds, each with the time it
// was printed ("t=<ms since the epoch>") and a word in green (ANSI SGR).
const liveScript = `import sys, time
rate, secs = int(sys.argv[1]), float(sys.argv[2])
t0 = time.time()
i = 0
while True:
    now = time.time()
    if now - t0 > secs:
        break
    due = int((now - t0) * rate)
    while i < due:
        i += 1
        sys.stdout.write("line %d t=%d \x1b[32mok\x1b[0m loss 0.%05d\n" % (i, time.time() * 1000, i))
    sys.stdout.flush()
    time.sleep(0.002)
`

// printedRE finds the number and print time of a line of liveScript.
var printedRE = regexp.MustCompile(`line (\d+) t=(\d{13})`)

// lagSamples are how far behind the printing a reader was, sampled during the run.
type lagSamples struct {
	last, most time.Duration
}

func (l *lagSamples) add(d time.Duration) { l.last, l.most = d, max(l.most, d) }

// streamReader reads a job's log as the dashboard's page does (its WebSocket, with the
// session cookie), without drawing anything: the peer of the tab.
type streamReader struct {
	mu      sync.Mutex
	printed int64 // the print time (ms) of the newest line received
	// first and newest are the number and print time (ms) of the first line received
	// and of the newest: the job's pace.
	first, newest [2]int64
}

// read reads the stream until it ends or ctx does.
func (r *streamReader) read(ctx context.Context, s *serverProc, id string) error {
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(s.url, "http")+"/jobs/"+id+"/follow", s.url)
	if err != nil {
		return err
	}
	cfg.Header.Set("Cookie", s.cookie.Name+"="+s.cookie.Value)
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		return fmt.Errorf("open the log stream: %w", err)
	}
	context.AfterFunc(ctx, func() { ws.Close() })
	defer ws.Close()
	for {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return nil // the job ended, or ctx did
		}
		all := printedRE.FindAllStringSubmatch(msg, -1)
		if len(all) == 0 {
			continue
		}
		var last [2]int64
		last[0], _ = strconv.ParseInt(all[len(all)-1][1], 10, 64)
		last[1], _ = strconv.ParseInt(all[len(all)-1][2], 10, 64)
		r.mu.Lock()
		if r.first[1] == 0 {
			r.first = last
		}
		r.newest, r.printed = last, last[1]
		r.mu.Unlock()
	}
}

// pace returns the lines a second the job printed, from the lines received.
func (r *streamReader) pace() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.newest[1] <= r.first[1] {
		return 0
	}
	return float64(r.newest[0]-r.first[0]) / (float64(r.newest[1]-r.first[1]) / 1000)
}

// lag returns how far behind the newest line received is now; 0 before the first.
func (r *streamReader) lag() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.printed == 0 {
		return 0
	}
	return time.Duration(time.Now().UnixMilli()-r.printed) * time.Millisecond
}

// tabLagJS returns, in the job's page, how far behind its log box is: now less the print
// time of the last line in pre#log's text (-1 before the first). It reads the text, so it
// measures any version of the page.
const tabLagJS = `(() => {
	const t = document.getElementById("log").textContent;
	const i = t.lastIndexOf("t=");
	return i < 0 ? -1 : Date.now() - parseInt(t.slice(i + 2, i + 15), 10);
})()`

// measureLive runs a job that prints cfg.liveRate lines a second, opens its page in
// Chromium and, beside it, reads the same log stream without drawing it; for
// cfg.liveSeconds it samples every half second how far behind the printing each is.
func measureLive(ctx context.Context, s *serverProc, cfg config) ([]figure, error) {
	// Still printing however late the last sample comes (a busy tab answers late); the
	// job is stopped once measured. After it stopped printing, "behind" would only grow.
	secs := cfg.liveSeconds + 600
	out, err := s.cli(ctx, "submit", "--no-wait", "--name", "live-log", "--", "/usr/bin/python3", "-c", liveScript,
		strconv.Itoa(cfg.liveRate), strconv.Itoa(secs))
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(out)
	defer func() { _, _ = s.cli(context.Background(), "stop", id) }()
	if err := s.waitRunning(ctx, id); err != nil {
		return nil, err
	}
	b, err := newBrowser(ctx, s, cfg.chromium)
	if err != nil {
		return nil, err
	}
	defer b.cancel()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(s.url+"/jobs/"+id)); err != nil {
		return nil, fmt.Errorf("open the live job's page: %w", err)
	}
	rctx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	peer := &streamReader{}
	go func() { _ = peer.read(rctx, s, id) }()

	var tab, stream lagSamples
	samples := 0
	start := time.Now()
	for ; time.Since(start) < time.Duration(cfg.liveSeconds)*time.Second; samples++ {
		time.Sleep(500 * time.Millisecond)
		ms, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](tabLagJS))
		if err != nil {
			return nil, fmt.Errorf("read the tab's log: %w", err)
		}
		if ms >= 0 {
			tab.add(time.Duration(ms * float64(time.Millisecond)))
		}
		stream.add(peer.lag())
	}
	elapsed := time.Since(start)
	kept, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.getElementById("log").textContent.split("\n").length - 1`))
	if err != nil {
		return nil, err
	}
	return []figure{{
		name:     fmt.Sprintf("live log of a job printing %d lines/s: how far the tab is behind after %d s", cfg.liveRate, cfg.liveSeconds),
		value:    tab.last,
		peerName: "the same log stream (/jobs/<id>/follow) read by a Go WebSocket client, not drawn",
		peer:     stream.last,
		detail: fmt.Sprintf("the most behind during the run: tab %s, stream %s; %d samples over %.1f s (a tab too busy to answer "+
			"stretches them); the job printed %.0f lines/s; %d lines in the box at the end",
			ms(tab.most), ms(stream.most), samples, elapsed.Seconds(), peer.pace(), kept),
	}}, nil
}

// waitRunning waits until the server says the job runs (a minute at most).
func (s *serverProc) waitRunning(ctx context.Context, id string) error {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/jobs/"+id, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := s.http.Do(req)
		if err == nil {
			var d struct {
				Job struct{ Status string } `json:"job"`
			}
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err == nil && d.Job.Status == "RUNNING" {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("it is %s", d.Job.Status)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s did not start within a minute: %v", id, err)
		}
	}
}
