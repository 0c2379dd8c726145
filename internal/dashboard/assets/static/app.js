// Trainyard's dashboard: a job's live log and status, the job list's refresh, sign-in
// links, curves and the machine's charts. No library but the vendored uPlot, nothing from
// outside.
"use strict";

// MAX_LINES bounds the lines the log box keeps in the page: the oldest go as new ones
// come, so the browser never holds a whole log.
const MAX_LINES = 5000;

// MAX_PARTIAL bounds a line that has not ended yet: past it, it is shown as a line of its
// own (the launcher cuts lines past 64 KiB already).
const MAX_PARTIAL = 64 << 10;

// LogBox shows a log in pre#log: one span.line per line (its text and its "\n", so that
// the box's text is the log's), ANSI SGR colours as classes (text only ever goes in as
// text, never as HTML), a filter that hides the lines without its text, and, for lines
// that arrive live, the time they arrived (data-t; the log files keep no times).
// Lines that arrive are queued and drawn together once per animation frame: a log that
// prints 1,000 lines a second costs one append per frame, not a redraw per message.
class LogBox {
  constructor(pre, filter, follow) {
    this.pre = pre;
    this.filter = filter;
    this.follow = follow;
    this.needle = "";
    this.sgr = { cls: "" };
    this.queue = [];
    this.partial = "";
    this.count = 0;
    this.scheduled = false;
    const text = pre.textContent;
    pre.textContent = "";
    this.take(text, true);
    this.draw(false);
    this.toEnd();
    if (filter) filter.addEventListener("input", () => this.refilter());
  }

  // take queues text: its whole lines, keeping the last MAX_LINES; a line not yet ended
  // waits for its end (or for close, or past MAX_PARTIAL).
  take(text, last) {
    const parts = (this.partial + text).split("\n");
    this.partial = parts.pop();
    if (last || this.partial.length > MAX_PARTIAL) {
      if (this.partial) parts.push(this.partial);
      this.partial = "";
    }
    for (const p of parts) this.queue.push(p);
    if (this.queue.length > 2 * MAX_LINES) this.queue = this.queue.slice(this.queue.length - MAX_LINES);
  }

  // add queues text that arrived live and draws it at the next animation frame.
  add(text) {
    this.take(text, false);
    if (!this.scheduled && this.queue.length) {
      this.scheduled = true;
      requestAnimationFrame(() => this.draw(true));
    }
  }

  // close draws what is left, the unfinished line too.
  close() {
    this.take("", true);
    this.draw(true);
  }

  // clear removes every line.
  clear() {
    this.pre.textContent = "";
    this.count = 0;
    this.queue = [];
    this.sgr = { cls: "" };
  }

  // draw appends the queued lines in one go, removes the oldest past MAX_LINES, and
  // keeps the end in view while follow is checked.
  draw(live) {
    this.scheduled = false;
    const lines = this.queue.length > MAX_LINES ? this.queue.slice(this.queue.length - MAX_LINES) : this.queue;
    this.queue = [];
    if (!lines.length) return;
    const at = live ? timeOfDay(new Date()) : "";
    const frag = document.createDocumentFragment();
    for (const l of lines) frag.appendChild(this.line(l, at));
    this.pre.appendChild(frag);
    this.count += lines.length;
    for (; this.count > MAX_LINES; this.count--) this.pre.removeChild(this.pre.firstChild);
    if (!this.follow || this.follow.checked) this.toEnd();
  }

  toEnd() { this.pre.scrollTop = this.pre.scrollHeight; }

  // line makes the span of one line.
  line(text, at) {
    const el = document.createElement("span");
    el.className = "line";
    if (at) el.dataset.t = at;
    renderANSI(overprint(text), this.sgr, el);
    el.appendChild(document.createTextNode("\n"));
    if (this.needle && !el.textContent.toLowerCase().includes(this.needle)) el.hidden = true;
    return el;
  }

  // refilter hides the lines without the filter's text.
  refilter() {
    this.needle = this.filter.value.toLowerCase();
    for (const el of this.pre.children) {
      el.hidden = this.needle !== "" && !el.textContent.toLowerCase().includes(this.needle);
    }
    if (!this.follow || this.follow.checked) this.toEnd();
  }
}

// timeOfDay writes a time as 15:04:05.
function timeOfDay(d) {
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

// overprint returns what a terminal shows of a line that holds carriage returns (a
// progress bar redrawn in place): its last part, ignoring a "\r" at its end ("\r\n").
function overprint(text) {
  if (!text.includes("\r")) return text;
  const parts = text.replace(/\r+$/, "").split("\r");
  return parts[parts.length - 1];
}

// ANSI escape sequences: CSI sequences (SGR is the one that ends in "m"), OSC sequences
// (a window title), character set choices, and any other escape with the character after
// it; all but SGR are dropped.
const ESCAPE = /\x1b(?:\[([0-9;:?]*)[ -\/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()*+][0-9A-Za-z]|.?)/g;

// renderANSI appends text to el, in spans whose classes carry the SGR state (colours,
// bold, underline), which it updates: state carries over from line to line as in a
// terminal. The text goes in as text nodes only.
function renderANSI(text, state, el) {
  if (!text.includes("\x1b")) {
    appendStyled(el, text, state.cls);
    return;
  }
  let at = 0;
  for (const m of text.matchAll(ESCAPE)) {
    if (m.index > at) appendStyled(el, text.slice(at, m.index), state.cls);
    if (m[2] === "m") applySGR(state, m[1]);
    at = m.index + m[0].length;
  }
  if (at < text.length) appendStyled(el, text.slice(at), state.cls);
}

function appendStyled(el, text, cls) {
  if (!text) return;
  if (!cls) {
    el.appendChild(document.createTextNode(text));
    return;
  }
  const span = document.createElement("span");
  span.className = cls;
  span.textContent = text;
  el.appendChild(span);
}

// applySGR applies the parameters of an SGR sequence ("1;31") to state: the basic and
// bright colours (30-37, 90-97, their backgrounds, and 38;5;N / 48;5;N for N < 16),
// bold, faint, italic, underline, and their resets. Other colours are left as they were.
function applySGR(state, params) {
  const codes = (params || "0").split(/[;:]/).map((c) => (c === "" ? 0 : Number(c)));
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0) Object.assign(state, { fg: null, bg: null, bold: false, faint: false, italic: false, underline: false });
    else if (c === 1) state.bold = true;
    else if (c === 2) state.faint = true;
    else if (c === 3) state.italic = true;
    else if (c === 4) state.underline = true;
    else if (c === 22) state.bold = state.faint = false;
    else if (c === 23) state.italic = false;
    else if (c === 24) state.underline = false;
    else if (c >= 30 && c <= 37) state.fg = c - 30;
    else if (c >= 90 && c <= 97) state.fg = c - 90 + 8;
    else if (c === 39) state.fg = null;
    else if (c >= 40 && c <= 47) state.bg = c - 40;
    else if (c >= 100 && c <= 107) state.bg = c - 100 + 8;
    else if (c === 49) state.bg = null;
    else if ((c === 38 || c === 48) && codes[i + 1] === 5) {
      const n = codes[i + 2];
      if (n >= 0 && n < 16) state[c === 38 ? "fg" : "bg"] = n;
      i += 2;
    } else if ((c === 38 || c === 48) && codes[i + 1] === 2) i += 4; // 24-bit colour: not shown
  }
  const cls = [];
  if (state.fg !== null && state.fg !== undefined) cls.push(`ansi-fg${state.fg}`);
  if (state.bg !== null && state.bg !== undefined) cls.push(`ansi-bg${state.bg}`);
  for (const k of ["bold", "faint", "italic", "underline"]) if (state[k]) cls.push(`ansi-${k}`);
  state.cls = cls.join(" ");
}

// startLog shows a job's log (pre#log) from its end, and follows it over a WebSocket
// while the job runs.
function startLog() {
  const pre = document.getElementById("log");
  if (!pre) return;
  const box = new LogBox(pre, document.getElementById("log-filter"), document.getElementById("follow"));
  const times = document.getElementById("log-times");
  if (times) {
    const show = () => pre.classList.toggle("times", times.checked);
    times.addEventListener("change", show);
    show();
  }
  if (pre.dataset.live !== "true") return;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  let url = `${scheme}//${location.host}/jobs/${encodeURIComponent(pre.dataset.job)}/follow`;
  if (pre.dataset.rank) url += `?rank=${encodeURIComponent(pre.dataset.rank)}`;
  const ws = new WebSocket(url);
  let first = true;
  ws.onmessage = (ev) => {
    if (first) { // the stream starts with the page's last lines again: not new lines
      first = false;
      box.clear();
      box.take(ev.data, false);
      box.draw(false);
      return;
    }
    box.add(ev.data);
  };
  ws.onclose = () => {
    box.close();
    pre.dataset.live = "ended";
  };
}

// REFRESH_MS is how often a running job's page asks for its status; the job list waits at
// least LIST_REFRESH_MS between refreshes, and 20 times what the last one took.
const REFRESH_MS = 2000;
const LIST_REFRESH_MS = 5000;

// getJSON fetches a dashboard path as JSON; null when it fails (signed out, say).
function getJSON(path) {
  return fetch(path, { credentials: "same-origin" })
    .then((resp) => (resp.ok && (resp.headers.get("Content-Type") || "").startsWith("application/json") ? resp.json() : null))
    .catch(() => null);
}

// getPage fetches a dashboard page and parses it (scripts never run in it); null when it
// fails or when the answer is not that page (the sign-in page, once signed out).
function getPage(path, mustHave) {
  return fetch(path, { credentials: "same-origin" })
    .then((resp) => (resp.ok ? resp.text() : null))
    .then((html) => {
      if (html === null) return null;
      const doc = new DOMParser().parseFromString(html, "text/html");
      return doc.getElementById(mustHave) ? doc : null;
    })
    .catch(() => null);
}

// swap replaces each element of this page named by ids with its namesake in doc.
function swap(doc, ids) {
  for (const id of ids) {
    const mine = document.getElementById(id);
    const theirs = doc.getElementById(id);
    if (mine && theirs) mine.replaceWith(document.adoptNode(theirs));
  }
}

// watchJob keeps a job's page true while the job has not ended: every REFRESH_MS (while
// the tab is visible) it reads the job's status, and writes it, its duration and why; once
// the job has ended, it loads the page once more and swaps in its buttons (Delete for
// Stop), fields and attempts, and says so to the curves (event trainyard:ended).
function watchJob() {
  const badge = document.getElementById("job-status");
  if (!badge || badge.dataset.ended !== "false") return;
  const path = `/jobs/${encodeURIComponent(badge.dataset.job)}`;
  const tick = () => {
    if (document.hidden) { setTimeout(tick, REFRESH_MS); return; }
    getJSON(`${path}/status.json`).then((st) => {
      if (!st) { setTimeout(tick, 5 * REFRESH_MS); return; }
      showStatus(st);
      if (!st.ended) { setTimeout(tick, REFRESH_MS); return; }
      getPage(location.pathname + location.search, "job-status").then((doc) => {
        if (doc) {
          swap(doc, ["job-status", "job-actions", "fields", "attempts", "checkpoints-box"]);
          bindForms();
          scrollBoxes();
        }
        document.dispatchEvent(new Event("trainyard:ended"));
      });
    });
  };
  setTimeout(tick, REFRESH_MS);
}

// showStatus writes a job's status, duration and why into its page.
function showStatus(st) {
  const badge = document.getElementById("job-status");
  badge.textContent = st.status;
  badge.className = `status ${st.status}`;
  const dur = document.getElementById("duration");
  if (dur) dur.textContent = st.duration;
  const why = document.getElementById("message");
  if (why) {
    why.textContent = st.message || "";
    why.hidden = !st.message;
    why.previousElementSibling.hidden = !st.message;
  }
}

// watchList refreshes the job list while one of its rows is pending or running and the
// tab is visible: it loads the same page again and swaps in its rows, count and page
// links, keeping the ticked rows ticked. It stops once no row shown is active; it waits
// at least LIST_REFRESH_MS, and 20 times what the last refresh took, between refreshes.
function watchList() {
  const active = () => document.querySelector("#jobs tbody span.status.running, #jobs tbody span.status.pending");
  let wait = LIST_REFRESH_MS;
  const tick = () => {
    if (!active()) return;
    if (document.hidden) { setTimeout(tick, wait); return; }
    const began = performance.now();
    getPage(location.pathname + location.search, "jobs").then((doc) => {
      if (!doc) { setTimeout(tick, 6 * wait); return; }
      const ticked = new Set([...document.querySelectorAll("#jobs tbody input:checked")].map((c) => c.value));
      const tbody = document.querySelector("#jobs tbody");
      tbody.replaceWith(document.adoptNode(doc.querySelector("#jobs tbody")));
      swap(doc, ["job-count", "pages"]);
      for (const c of document.querySelectorAll("#jobs tbody input[type=checkbox]")) c.checked = ticked.has(c.value);
      window.trainyardListRefreshes = (window.trainyardListRefreshes || 0) + 1;
      wait = Math.max(LIST_REFRESH_MS, 20 * (performance.now() - began));
      setTimeout(tick, wait);
    });
  };
  setTimeout(tick, wait);
}

// bindForms asks before Stop and Delete.
function bindForms() {
  const stop = document.getElementById("stop-form");
  if (stop) stop.addEventListener("submit", (ev) => {
    if (!confirm("Stop this job?")) ev.preventDefault();
  });
  const del = document.getElementById("delete-form");
  if (del) del.addEventListener("submit", (ev) => {
    if (!confirm("Delete this job and its record? Its run folder stays.")) ev.preventDefault();
  });
}

// scrollBoxes shows the end of each box of bounded height that asks for it (the newest
// checkpoints).
function scrollBoxes() {
  for (const box of document.querySelectorAll(".scroll-box[data-end]")) box.scrollTop = box.scrollHeight;
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
  bindForms();
  scrollBoxes();
  watchJob();
  watchList();
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
    const more = () => {
      const before = runs[0].xs.length;
      return load(0).then(() => {
        if (runs[0].xs.length === before) return;
        draw();
        showLatest(runs[0].latest);
      });
    };
    const timer = setInterval(more, 2000);
    // Once the job has ended, its last results, then no more asking.
    document.addEventListener("trainyard:ended", () => { clearInterval(timer); more(); });
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
  showProgress(r);
}

// showProgress writes how far a running job that reports total_iterations is, and the
// time left at its pace so far, as the page renders them (funcs.go's progressOf).
function showProgress(r) {
  const dd = document.getElementById("progress");
  const total = r.metrics && r.metrics.total_iterations;
  if (!dd || typeof total !== "number" || total <= 0 || r.iteration <= 0) return;
  const percent = Math.floor(Math.min(100, (100 * r.iteration) / total));
  const bar = document.createElement("progress");
  bar.max = 100;
  bar.value = percent;
  let text = ` ${percent}%`;
  const left = total - r.iteration;
  if (left > 0 && r.timeTotalS > 0) text += `, ${goDuration((left * r.timeTotalS) / r.iteration)} left`;
  dd.replaceChildren(bar, document.createTextNode(text));
  dd.hidden = dd.previousElementSibling.hidden = false;
}

// goDuration writes seconds as Go's time.Duration does, rounded to the second: 4m10s.
function goDuration(s) {
  s = Math.round(s);
  if (s === 0) return "0s";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return (h ? `${h}h${m}m` : m ? `${m}m` : "") + `${sec}s`;
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
