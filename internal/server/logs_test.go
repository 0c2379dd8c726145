package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/store"
)

// readWindow returns the text a window sends.
func readWindow(t *testing.T, win logWindow) string {
	t.Helper()
	data, err := io.ReadAll(win.reader())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readLogTail returns what a response of the log at path holds: its last limit bytes.
func readLogTail(t *testing.T, path string, limit int64) (string, error) {
	t.Helper()
	log, err := openLog(path)
	if err != nil {
		return "", err
	}
	defer log.Close()
	win, err := cutLog(log, log.size, limit)
	if err != nil {
		return "", err
	}
	return readWindow(t, win), nil
}

// readDriverLog returns what Ray's logs endpoint sends of a run's driver output.
func readDriverLog(t *testing.T, runDir string, limit int64) (string, error) {
	t.Helper()
	log, err := openDriverLog(runDir)
	if err != nil {
		return "", err
	}
	defer log.Close()
	win, err := cutLog(log, log.size, limit)
	if err != nil {
		return "", err
	}
	return readWindow(t, win), nil
}

// bufferedTail is how the server answered a log before it streamed it, read whole: the
// reference that the streamed answers must equal byte for byte.
func bufferedTail(data []byte, limit int64, tail int) string {
	size := int64(len(data))
	text := string(data)
	if size > limit {
		text = string(data[size-limit:])
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
		text = fmt.Sprintf("[LOG TRUNCATED — showing last %s of %s total]\n%s", humanBytes(limit), humanBytes(size), text)
	}
	return logstream.LastLines(text, tail)
}

// The streamed window, cut and tailed, is exactly the text the server used to build in
// memory, for logs of every shape: with and without a final newline, empty lines, one
// long line, cut or not, files split anywhere.
func TestLogWindowMatchesTheBufferedAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "bc", "\n", "\n\n", "long line without end ", "é", "x\n"}
	for i := range 3000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		data := []byte(b.String())
		limit, tail := int64(rng.IntN(len(data)+3)), rng.IntN(6)
		log := splitLog(t, data, rng)
		win, err := cutLog(log, log.size, limit)
		if err == nil {
			win, err = win.lastLines(tail)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := readWindow(t, win), bufferedTail(data, limit, tail); got != want {
			t.Fatalf("case %d: log %q, limit %d, tail %d:\n got %q\nwant %q", i, data, limit, tail, got, want)
		}
	}
}

// splitLog returns data as a fileLog of up to three files, split at random.
func splitLog(t *testing.T, data []byte, rng *rand.Rand) *fileLog {
	t.Helper()
	dir := t.TempDir()
	log := &fileLog{}
	t.Cleanup(func() { log.Close() })
	for i := 0; len(data) > 0 || i == 0; i++ {
		n := len(data)
		if i < 2 && n > 0 {
			n = rng.IntN(n + 1)
		}
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, data[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.add(f); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	return log
}

// Ray's {"logs": ...} is written a chunk at a time exactly as encoding/json writes it
// whole, though chunks end inside UTF-8 sequences and the text holds invalid ones.
func TestWriteJSONLogsMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "\"", "\\", "\n", "\t", "\x1b", "<&>", "é", "€", "𝄞", "\u2028", "\xff", "\xe2\x82", "ok "}
	for i := range 2000 {
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		want, err := json.Marshal(rayLogsResponse{Logs: b.String()})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := writeJSONLogs(&got, strings.NewReader(b.String()), 1+rng.IntN(7)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want)+"\n", got.String()); diff != "" {
			t.Fatalf("case %d, text %q (-want +got):\n%s", i, b.String(), diff)
		}
	}
}

// The raw and downloaded logs are not to be kept by caches, on both APIs.
func TestLogsAreNoStore(t *testing.T) {
	e := newEnv(t)
	e.nativeSubmit(`{"id": "cached", "job": ` + trainJob("echo a line") + `}`)
	e.waitStatus("cached", store.Succeeded)
	for _, path := range []string{"/api/v1/jobs/cached/logs", "/api/v1/jobs/cached/logs?whole=1",
		"/api/v1/jobs/cached/logs?tail=1", "/api/v1/jobs/cached/logs?rank=0", "/api/jobs/cached/logs"} {
		r := e.request("GET", path, nil)
		wantStatus(t, r, http.StatusOK)
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", path, got)
		}
	}
}

// Five clients reading a 20 MiB log at once, from both APIs, cost the server a few
// chunks each, not copies of the 16 MiB window: its heap grows by less than 16 MiB in
// all (it grew by 208 MiB, and 374 MiB for Ray's, when each answer was built in memory).
func TestConcurrentLogReadsUseBoundedMemory(t *testing.T) {
	e := newEnv(t)
	e.nativeSubmit(`{"id": "big", "job": ` + trainJob("echo short") + `}`)
	j := e.waitStatus("big", store.Succeeded)
	writeBigLog(t, filepath.Join(j.RunDir, jobs.ConsoleLog), 20<<20)
	writeBigLog(t, filepath.Join(j.RunDir, "logs", "attempt-1", "rank-0.log"), 20<<20)
	for _, path := range []string{"/api/v1/jobs/big/logs", "/api/jobs/big/logs"} {
		t.Run(path, func(t *testing.T) {
			peak := peakHeapGrowth(func() { readConcurrently(t, e, path, 5) })
			t.Logf("5 concurrent GET %s of a 20 MiB log: heap grew by %.1f MiB at most", path, float64(peak)/(1<<20))
			if peak > 16<<20 {
				t.Errorf("5 concurrent GET %s: the heap grew by %.1f MiB, want under 16 MiB", path, float64(peak)/(1<<20))
			}
		})
	}
}

// writeBigLog writes a log of about size bytes of 100-byte lines at path.
func writeBigLog(t *testing.T, path string, size int) {
	t.Helper()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat(line, size/len(line))), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readConcurrently sends n GETs of path at once and reads each answer to its end,
// keeping none of it.
func readConcurrently(t *testing.T, e *env, path string, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequest("GET", e.web.URL+path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := e.web.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, err := io.Copy(io.Discard, resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK || got < maxLogBytes {
				t.Errorf("GET %s: %d, %d bytes, %v", path, resp.StatusCode, got, err)
			}
		})
	}
	wg.Wait()
}

// peakHeapGrowth runs f and returns the most the live heap grew over its size before,
// sampled every millisecond. The collector runs at GOGC=10 meanwhile: HeapAlloc counts
// garbage not yet collected too, and at the default 100 a loaded machine (CI's, beside
// the other packages' tests) lets a streaming read's garbage pile up past the bound.
func peakHeapGrowth(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak - base
}
