// Trainyard's dashboard: live log of a job's page. No library, nothing from outside.
"use strict";

// MAX_LINES bounds what the page holds of a log: the browser never keeps a whole log.
const MAX_LINES = 5000;

function startLog() {
  const pre = document.getElementById("log");
  if (!pre || pre.dataset.live !== "true") return;
  const follow = document.getElementById("follow");
  const filter = document.getElementById("log-filter");
  let lines = pre.textContent.split("\n");
  let partial = "";
  let first = true;
  const render = () => {
    const f = filter ? filter.value.toLowerCase() : "";
    const shown = f ? lines.filter((l) => l.toLowerCase().includes(f)) : lines;
    pre.textContent = shown.join("\n");
    if (follow && follow.checked) pre.scrollTop = pre.scrollHeight;
  };
  if (filter) filter.addEventListener("input", render);
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  let url = `${scheme}//${location.host}/jobs/${encodeURIComponent(pre.dataset.job)}/follow`;
  if (pre.dataset.rank) url += `?rank=${encodeURIComponent(pre.dataset.rank)}`;
  const ws = new WebSocket(url);
  ws.onmessage = (ev) => {
    if (first) { lines = []; first = false; } // the stream starts with the page's last lines again
    const parts = (partial + ev.data).split("\n");
    partial = parts.pop();
    lines.push(...parts);
    if (lines.length > MAX_LINES) lines = lines.slice(lines.length - MAX_LINES);
    render();
  };
  ws.onclose = () => {
    if (partial) { lines.push(partial); partial = ""; render(); }
    pre.dataset.live = "ended";
  };
}

function filterStatic() {
  const pre = document.getElementById("log");
  const filter = document.getElementById("log-filter");
  if (!pre || !filter || pre.dataset.live === "true") return;
  const all = pre.textContent.split("\n");
  filter.addEventListener("input", () => {
    const f = filter.value.toLowerCase();
    pre.textContent = (f ? all.filter((l) => l.toLowerCase().includes(f)) : all).join("\n");
  });
}

// signInWithLink posts the one-time code of a sign-in link (/login#code=...): the code
// stays in the fragment, which the browser never sends, and leaves the address bar.
function signInWithLink() {
  const form = document.getElementById("code-form");
  const m = location.hash.match(/^#code=([A-Za-z0-9_-]+)$/);
  if (!form || !m) return;
  history.replaceState(null, "", location.pathname + location.search);
  document.getElementById("code").value = m[1];
  form.submit();
}

// A link opened in a tab that shows the sign-in page already changes only the fragment.
window.addEventListener("hashchange", signInWithLink);

document.addEventListener("DOMContentLoaded", () => {
  signInWithLink();
  startLog();
  filterStatic();
  const stop = document.getElementById("stop-form");
  if (stop) stop.addEventListener("submit", (ev) => {
    if (!confirm("Stop this job?")) ev.preventDefault();
  });
  const del = document.getElementById("delete-form");
  if (del) del.addEventListener("submit", (ev) => {
    if (!confirm("Delete this job and its record? Its run folder stays.")) ev.preventDefault();
  });
});

// Metric curves: one chart per metric, one series per job (the compare page overlays
// jobs). Points come from /jobs/{id}/results.json; a running job's curves gain its new
// results every 2 seconds. Smoothing is TensorBoard's debiased exponential moving average.
const COLORS = ["#2f5bd3", "#d9480f", "#2b8a3e", "#ae3ec9", "#e67700", "#0c8599", "#c2255c", "#5c940d"];

function smooth(ys, weight) {
  if (!weight) return ys;
  let last = 0, n = 0;
  return ys.map((y) => {
    if (y === null || !isFinite(y)) return y;
    last = last * weight + (1 - weight) * y;
    n++;
    return last / (1 - Math.pow(weight, n));
  });
}

function startCurves() {
  const el = document.getElementById("curves") || document.getElementById("compare-curves");
  if (!el || typeof uPlot === "undefined") return;
  // Each ID and label is path-escaped (a ',' in one is %2C), then joined by ','.
  const ids = el.dataset.jobs.split(",").map(decodeURIComponent);
  const labels = el.dataset.labels.split(",").map(decodeURIComponent);
  const runs = ids.map(() => ({ xs: [], metrics: {}, last: 0, total: 0 })); // per job
  const smoothing = document.getElementById("smoothing");
  const logScale = document.getElementById("log-scale");
  const points = document.getElementById("points");
  let charts = {};

  const add = (run, list) => {
    for (const r of list.results) {
      if (r.iteration <= run.last) continue;
      run.xs.push(r.iteration);
      const seen = new Set();
      for (const [k, v] of Object.entries(r.metrics || {})) {
        if (!run.metrics[k]) run.metrics[k] = new Array(run.xs.length - 1).fill(null);
        run.metrics[k].push(typeof v === "number" ? v : null);
        seen.add(k);
      }
      for (const k of Object.keys(run.metrics)) if (!seen.has(k)) run.metrics[k].push(null);
      run.last = r.iteration;
      run.latest = r;
    }
    run.total = Math.max(run.total, run.xs.length);
  };

  const draw = () => {
    const weight = smoothing ? parseFloat(smoothing.value) : 0;
    const log = logScale && logScale.checked;
    const names = [...new Set(runs.flatMap((r) => Object.keys(r.metrics)))].sort();
    for (const c of Object.values(charts)) c.destroy();
    charts = {};
    el.textContent = names.length ? "" : "No metrics reported yet.";
    for (const name of names) {
      const tables = runs.map((run) => {
        let ys = smooth(run.metrics[name] || run.xs.map(() => null), weight);
        if (log) ys = ys.map((y) => (y > 0 ? y : null));
        return [run.xs, ys];
      });
      const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
      const series = [{ label: "iteration" }].concat(runs.map((_, i) => ({
        label: labels[i], stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true, points: { show: false },
      })));
      const box = document.createElement("div");
      box.className = "curve";
      box.dataset.metric = name;
      el.appendChild(box);
      charts[name] = new uPlot({
        title: name, width: 460, height: 240, series,
        scales: { x: { time: false }, y: { distr: log ? 3 : 1 } },
        legend: { show: runs.length > 1 },
      }, data, box);
    }
    if (points) points.textContent = runs.map((r) => `${r.xs.length} points`).join(", ");
    window.trainyardCurvesDrawn = performance.now(); // for bench/dashboard
  };

  const most = el.dataset.max ? `&max=${encodeURIComponent(el.dataset.max)}` : "";
  const load = (i) => fetch(`/jobs/${encodeURIComponent(ids[i])}/results.json?after=${runs[i].last}${most}`,
    { credentials: "same-origin" }).then((resp) => (resp.ok ? resp.json() : { results: [] }))
    .then((list) => add(runs[i], list));

  Promise.all(ids.map((_, i) => load(i))).then(draw);
  if (smoothing) smoothing.addEventListener("input", draw);
  if (logScale) logScale.addEventListener("change", draw);
  if (el.dataset.live === "true") {
    setInterval(() => {
      const before = runs[0].xs.length;
      load(0).then(() => {
        if (runs[0].xs.length === before) return;
        draw();
        showLatest(runs[0].latest);
      });
    }, 2000);
  }
}

document.addEventListener("DOMContentLoaded", startCurves);

// showLatest writes a running job's newest result into its "Last result" field, as the
// page renders it (metrics by name, 5 significant digits).
function showLatest(r) {
  const dd = document.getElementById("last-result");
  if (!dd || !r) return;
  const metrics = Object.keys(r.metrics || {}).sort()
    .map((k) => `${k}=${typeof r.metrics[k] === "number" ? parseFloat(r.metrics[k].toPrecision(5)) : r.metrics[k]}`);
  dd.textContent = `iteration ${r.iteration}: ${metrics.join(" ")}`;
}

// The machine page: each GPU's utilization and memory over the last hour, from the
// dashboard's samples (refreshed every 5 seconds).
function startMachine() {
  const el = document.getElementById("machine-curves");
  if (!el || typeof uPlot === "undefined") return;
  const draw = (samples) => {
    el.textContent = "";
    if (!samples.length) { el.textContent = "No samples yet."; return; }
    const xs = samples.map((s) => Date.parse(s.time) / 1000);
    const gpus = [...new Set(samples.flatMap((s) => (s.gpus || []).map((g) => g.index)))].sort((a, b) => a - b);
    const series = (pick) => gpus.map((idx) => samples.map((s) => {
      const g = (s.gpus || []).find((x) => x.index === idx);
      return g ? pick(g) : null;
    }));
    for (const [title, pick] of [["utilization %", (g) => g.percent], ["memory used (MiB)", (g) => g.memoryUsedBytes / 1048576]]) {
      const box = document.createElement("div");
      box.className = "curve";
      el.appendChild(box);
      new uPlot({
        title, width: 460, height: 220,
        // at least the last 5 minutes, so that a few samples do not stretch over years
        scales: { x: { time: true, auto: false, min: Math.min(xs[0], xs[xs.length - 1] - 300), max: xs[xs.length - 1] + 1 } },
        series: [{}].concat(gpus.map((idx, i) => ({
          label: `GPU ${idx}`, stroke: COLORS[i % COLORS.length], points: { show: samples.length < 60 },
        }))),
      }, [xs, ...series(pick)], box);
    }
  };
  const load = () => fetch("/machine/samples.json", { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : [])).then(draw);
  load();
  setInterval(load, 5000);
}

document.addEventListener("DOMContentLoaded", startMachine);
