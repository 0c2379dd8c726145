package browser

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// reporter reports loss and acc twice a second, forever: python3 with the trainyard helper.
const reporter = `import time, trainyard
i = 0
while True:
    i += 1
    trainyard.report({"loss": 1.0 / i, "acc": min(1.0, i / 100), "total_iterations": 1000})
    time.sleep(0.5)
`

// fakeSMI writes an nvidia-smi that reports two GPUs, busy 37% and 0%, and returns the
// PATH entry that puts it first.
func fakeSMI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncat <<'ROWS'\n" +
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559, 2048, 37, 570.86.15\n" +
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA H100 80GB HBM3, 81559, 0, 0, 570.86.15\n" +
		"ROWS\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH")
}

// A running job's metric curves gain points live; two finished runs are compared (their
// curves overlaid, their final metrics, the settings that differ); the machine page shows
// each GPU's use and the job that holds it.
func TestDashboardCurvesCompareAndMachine(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("Chromium is missing (neither /usr/bin/chromium nor chromium on PATH): install Debian's package chromium to run the browser test")
	}
	s := startServer(t, bin, fakeSMI(t))
	script := filepath.Join(s.dir, "reporter.py")
	if err := os.WriteFile(script, []byte(reporter), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := s.cli("submit", "--no-wait", "--name", "reporter", "--gpus-per-worker", "1", "--", "/usr/bin/python3", script)
	if err != nil {
		t.Fatal(err)
	}
	live := strings.TrimSpace(out)
	runA := s.submit(t, "lr-small", "/usr/bin/python3", "-c", "import trainyard\nfor i in range(20): trainyard.report({'loss': 1/(1+i)})")
	ckpt, err := s.cli("submit", "--no-wait", "--name", "ckpt", "--keep-checkpoints", "1", "--", "/usr/bin/python3", "-c",
		"import os, trainyard\nfor i in range(3):\n    d = trainyard.new_checkpoint_dir()\n    open(os.path.join(d, 'm'), 'w').write('x' * 100)\n    trainyard.report({'loss': 1 / (i + 1)}, checkpoint=d)")
	if err != nil {
		t.Fatal(err)
	}
	ckpt = strings.TrimSpace(ckpt)
	runB := s.submit(t, "lr-large", "/usr/bin/python3", "-c", "import trainyard\nfor i in range(30): trainyard.report({'loss': 1/(1+3*i), 'acc': i/30})")
	s.waitStatus(t, runA, "SUCCEEDED")
	s.waitStatus(t, runB, "SUCCEEDED")
	s.waitStatus(t, ckpt, "SUCCEEDED")
	s.waitStatus(t, live, "RUNNING")

	ctx := newBrowser(t, chromium)
	signInWith(t, ctx, s.link(t), s.url+"/")

	// The live job's page: a chart per metric, and the loss curve gains points.
	load(t, ctx, "open the reporter's page", chromedp.Navigate(s.url+"/jobs/"+live))
	var first int
	poll(t, 30*time.Second, "the reporter's curves to be drawn", func() (bool, error) {
		n, err := points(ctx)
		first = n
		return err == nil && n > 0, err
	})
	if use := run(t, ctx, "read rank 0's GPU use", chromedp.Evaluate[string](
		`document.querySelector('table.ranks tr[data-rank="0"]').cells[5].textContent`)); use != "37%, 2048 MiB of 81559 MiB" {
		t.Errorf("rank 0's GPU use %q, want 37%%, 2048 MiB of 81559 MiB", use)
	}
	charts := run(t, ctx, "list the charts", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#curves .curve")].map((c) => c.dataset.metric)`))
	if strings.Join(charts, ",") != "acc,loss,total_iterations" {
		t.Errorf("charts %v, want acc, loss and total_iterations", charts)
	}
	poll(t, 30*time.Second, fmt.Sprintf("the curves to gain points after %d, without a reload", first), func() (bool, error) {
		n, err := points(ctx)
		return err == nil && n > first, err
	})
	do(t, ctx, "turn on smoothing and the log scale", chromedp.SetValue(chromedp.ID("smoothing"), "0.9"),
		chromedp.Click(chromedp.ID("log-scale")))
	if n := run(t, ctx, "count the charts", chromedp.Evaluate[int](`document.querySelectorAll("#curves .curve canvas").length`)); n != 3 {
		t.Errorf("%d charts after switching to the log scale, want 3", n)
	}
	screenshot(t, ctx, "job-curves.png")

	// A job that kept 1 of its 3 checkpoints lists all three, with the two it deleted.
	load(t, ctx, "open the checkpointing job's page", chromedp.Navigate(s.url+"/jobs/"+ckpt))
	ckpts := run(t, ctx, "read the checkpoints", chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll("#checkpoints tbody tr")].map((r) => [...r.cells].map((c) => c.textContent.trim()))`))
	wantCkpts := [][]string{{"checkpoint_000001", "1", "loss=1", "-", "deleted"}, {"checkpoint_000002", "2", "loss=0.5", "-", "deleted"},
		{"checkpoint_000003", "3", "loss=0.33333", "100 B", "kept"}}
	if fmt.Sprint(ckpts) != fmt.Sprint(wantCkpts) {
		t.Errorf("checkpoints\n%v\nwant\n%v", ckpts, wantCkpts)
	}

	// Compare the two finished runs, ticked in the job list.
	load(t, ctx, "open the job list", chromedp.Navigate(s.url+"/"))
	// The reporter says it runs 1000 iterations: its row shows how far it is, and an ETA.
	progress := run(t, ctx, "read the reporter's progress", chromedp.TextContent(chromedp.CSS(`#jobs tr[data-id="`+live+`"] td.progress`)))
	if !regexp.MustCompile(`^\s*\d+%\s+\d+%, (\d+m)?\d+s left`).MatchString(progress) {
		t.Errorf("the reporter's progress %q, want a percentage and the time left", progress)
	}
	load(t, ctx, "compare the two runs", chromedp.Click(chromedp.CSS(`input[name=id][value="`+runA+`"]`)),
		chromedp.Click(chromedp.CSS(`input[name=id][value="`+runB+`"]`)), chromedp.Click(chromedp.ID("compare")))
	table := run(t, ctx, "read the final metrics", chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll("#final-metrics tr")].map((r) => [...r.cells].map((c) => c.textContent.trim()))`))
	want := [][]string{{"Job", "Status", "Iteration", "acc", "loss"}, // in the list's order: newest first
		{"lr-large", "succeeded", "30", "0.966667", "0.0113636"}, {"lr-small", "succeeded", "20", "-", "0.05"}}
	if fmt.Sprint(table) != fmt.Sprint(want) {
		t.Errorf("final metrics\n%v\nwant\n%v", table, want)
	}
	diffs := run(t, ctx, "read the differences", chromedp.TextContent(chromedp.ID("config-diffs")))
	if !strings.Contains(diffs, "command[2]") || strings.Contains(diffs, "runName") {
		t.Errorf("the differences should name command[2] and not the run names:\n%s", diffs)
	}
	poll(t, 30*time.Second, "the overlaid curves", func() (bool, error) {
		legends, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#compare-curves .curve[data-metric="loss"] .u-legend .u-label')].map((l) => l.textContent)`))
		return err == nil && strings.Join(legends, ",") == "iteration,lr-large,lr-small", fmt.Errorf("loss legend %v", legends)
	})
	screenshot(t, ctx, "compare.png")

	// The machine: GPU 0 busy 37%, held by the reporter; GPU 1 free.
	load(t, ctx, "open the machine page", chromedp.Click(chromedp.ID("machine-link")))
	rows := run(t, ctx, "read the GPUs", chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll("#gpus tbody tr")].map((r) => [...r.cells].map((c) => c.textContent.trim()))`))
	wantGPUs := [][]string{{"0", "37%", "2048 MiB of 81559 MiB", "reporter (worker 0)"}, {"1", "0%", "0 MiB of 81559 MiB", "free"}}
	if fmt.Sprint(rows) != fmt.Sprint(wantGPUs) {
		t.Errorf("GPUs\n%v\nwant\n%v", rows, wantGPUs)
	}
	screenshot(t, ctx, "machine.png")
}

// points returns how many points the page's first job's curves hold (span#points).
func points(ctx context.Context) (int, error) {
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("points")))
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.Fields(text + " x")[0])
	if err != nil {
		return 0, fmt.Errorf("small#points says %q", text)
	}
	return n, nil
}
