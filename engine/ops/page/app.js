// switchyard's status page: reads /api/overview every 2 s and one page of
// /api/functions every 3 s. The server searches, sorts and pages the
// functions, so the page stays light with any number of them. The view
// (search, sort, page) lives in the URL's query: ?q=&sort=&desc=&offset=&limit=.
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const view = {
  q: params.get("q") || "",
  sort: params.get("sort") || "name",
  desc: params.get("desc") === "1",
  offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0),
  limit: Math.min(1000, Math.max(1, parseInt(params.get("limit") || "50", 10) || 50)),
};
const loaded = { overview: false, functions: false };

function markLoaded(part) {
  loaded[part] = true;
  if (loaded.overview && loaded.functions) {
    document.body.dataset.loaded = "1";
  }
}

const intFmt = new Intl.NumberFormat("en-US");
function fmtInt(n) { return intFmt.format(n); }
function fmtRate(r) {
  if (r === null || r === undefined) return "–";
  if (r === 0) return "0";
  if (r < 10) return r.toFixed(2);
  if (r < 1000) return r.toFixed(1);
  return fmtInt(Math.round(r));
}
function fmtSeconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + " ms";
  if (s < 120) return s.toFixed(2) + " s";
  return (s / 60).toFixed(1) + " min";
}
function fmtUptime(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d > 0) return "up " + d + "d " + h + "h";
  if (h > 0) return "up " + h + "h " + m + "m";
  return "up " + m + "m " + Math.floor(s % 60) + "s";
}

// spark draws values (nulls are gaps) as polylines across the box.
function spark(svg, values) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const n = values.length;
  if (n < 2) return;
  let max = 0;
  for (const v of values) if (v !== null && v > max) max = v;
  if (max === 0) max = 1;
  const ns = "http://www.w3.org/2000/svg";
  let pts = [];
  const flush = () => {
    if (pts.length > 1) {
      const pl = document.createElementNS(ns, "polyline");
      pl.setAttribute("points", pts.join(" "));
      svg.appendChild(pl);
    }
    pts = [];
  };
  values.forEach((v, i) => {
    if (v === null) { flush(); return; }
    const x = (300 * i / (n - 1)).toFixed(1);
    const y = (38 - 36 * v / max).toFixed(1);
    pts.push(x + "," + y);
  });
  flush();
}

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  if (!resp.ok) throw new Error(url + ": " + resp.status);
  return resp.json();
}

function cell(tr, text, col, value) {
  const td = document.createElement("td");
  td.textContent = text;
  if (col) td.dataset.col = col;
  if (value !== undefined) {
    td.dataset.value = String(value);
    if (value === 0) td.classList.add("zero");
  }
  tr.appendChild(td);
  return td;
}

async function refreshOverview() {
  let o;
  try {
    o = await getJSON("api/overview");
  } catch (e) {
    $("state").textContent = "unreachable";
    $("state").className = "state down";
    return;
  }
  $("version").textContent = "version " + o.version + (o.revision ? " (" + o.revision.slice(0, 12) + ")" : "");
  $("state").textContent = o.state;
  $("state").className = "state " + o.state;
  // The job store: its state beside the server's, and why it takes no
  // writes, in full, while it does not.
  const store = $("store"), failure = $("store-failure");
  store.hidden = !o.store;
  if (o.store) {
    store.textContent = o.store.up ? "store ok" : "store failed";
    store.className = "state " + (o.store.up ? "ok" : "down");
    store.title = o.store.failure || "";
  }
  failure.hidden = !o.store || o.store.up;
  failure.textContent = o.store && !o.store.up
    ? "The job store takes no writes: " + o.store.failure +
      ". Submits that need it are refused (" + fmtInt(o.refused.store || 0) + " so far); it retries by itself."
    : "";
  $("uptime").textContent = fmtUptime(o.uptime);
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  $("rate-submitted").textContent = fmtRate(o.rates.submitted);
  $("rate-completed").textContent = fmtRate(o.rates.completed);
  $("rate-failed").textContent = fmtRate(o.rates.failed);
  $("jobs").textContent = fmtInt(o.jobs);
  $("jobs").dataset.value = o.jobs;
  $("running").textContent = fmtInt(o.running);
  $("running").dataset.value = o.running;
  $("wait-p99").textContent = fmtSeconds(o.wait.p99);
  $("run-p99").textContent = fmtSeconds(o.run.p99);
  $("window").textContent = o.window >= 59 ? "the last minute" : "the last " + Math.round(o.window) + " s";
  for (const [id, q] of [["wait", o.wait], ["run", o.run]]) {
    $(id + "-p50").textContent = fmtSeconds(q.p50);
    $(id + "-p90").textContent = fmtSeconds(q.p90);
    $(id + "-p99b").textContent = fmtSeconds(q.p99);
  }
  const s = o.series;
  spark($("spark-submitted"), s.submitted || []);
  spark($("spark-completed"), s.completed || []);
  spark($("spark-failed"), s.failed || []);
  spark($("spark-jobs"), s.jobs || []);
  spark($("spark-running"), s.running || []);
  spark($("spark-wait"), s.wait_p99 || []);
  spark($("spark-run"), s.run_p99 || []);

  const tbody = $("protocols").tBodies[0];
  tbody.textContent = "";
  for (const p of o.protocols || []) {
    const counted = ["submitted", "completed", "failed", "exception", "retried", "timed_out"].some((k) => p[k] > 0);
    if (p.connections === null && !counted) continue; // not served here, nothing from it
    const tr = document.createElement("tr");
    tr.dataset.protocol = p.name;
    cell(tr, p.name);
    cell(tr, p.connections === null ? "–" : fmtInt(p.connections), "connections", p.connections === null ? undefined : p.connections);
    for (const k of ["submitted", "completed", "failed", "exception", "retried", "timed_out"]) {
      cell(tr, fmtInt(p[k]), k, p[k]);
    }
    tbody.appendChild(tr);
  }
  $("functions-count").textContent = "(" + fmtInt(o.functions) + " known)";
  markLoaded("overview");
}

// refreshCluster shows the cluster on a node of one (/api/cluster is
// there only then): this node's role and term, and every member.
async function refreshCluster() {
  let c;
  try {
    c = await getJSON("api/cluster");
  } catch (e) {
    return; // a single server, or unreachable: the overview says which
  }
  $("cluster").hidden = false;
  $("cluster-summary").textContent = "(this node: " + c.id + ", " + c.role + ", term " + c.term +
    ", leader " + (c.leader || "none") + ", commit " + fmtInt(c.commit_index) + ", applied " + fmtInt(c.applied_index) + ")";
  const tbody = $("members").tBodies[0];
  tbody.textContent = "";
  for (const m of c.members || []) {
    const tr = document.createElement("tr");
    tr.dataset.node = m.id;
    cell(tr, m.id + (m.id === c.id ? " (this node)" : ""));
    cell(tr, m.addr);
    cell(tr, m.leader ? "leader" : m.voter ? "follower" : "non-voter", "role");
    cell(tr, m.lag < 0 ? "–" : fmtInt(m.lag), "lag", m.lag < 0 ? undefined : m.lag);
    tbody.appendChild(tr);
  }
  $("cluster").dataset.loaded = "1";
}

function query() {
  const p = new URLSearchParams();
  if (view.q) p.set("q", view.q);
  if (view.sort !== "name") p.set("sort", view.sort);
  if (view.desc) p.set("desc", "1");
  if (view.offset) p.set("offset", String(view.offset));
  if (view.limit !== 50) p.set("limit", String(view.limit));
  return p.toString();
}

let fnSeq = 0;
async function refreshFunctions() {
  const seq = ++fnSeq;
  let page;
  try {
    const p = new URLSearchParams(query());
    p.set("limit", String(view.limit));
    page = await getJSON("api/functions?" + p.toString());
  } catch (e) {
    return;
  }
  if (seq !== fnSeq) return; // a newer view was asked for meanwhile
  const tbody = $("functions").tBodies[0];
  const rows = document.createDocumentFragment();
  for (const f of page.functions) {
    const tr = document.createElement("tr");
    tr.dataset.function = f.name;
    cell(tr, f.name, "name").classList.add("name");
    cell(tr, fmtInt(f.queued[0]), "high", f.queued[0]);
    cell(tr, fmtInt(f.queued[1]), "normal", f.queued[1]);
    cell(tr, fmtInt(f.queued[2]), "low", f.queued[2]);
    cell(tr, fmtInt(f.later), "later", f.later);
    cell(tr, fmtInt(f.running), "running", f.running);
    cell(tr, fmtInt(f.workers), "workers", f.workers);
    cell(tr, fmtInt(f.total), "total", f.total);
    cell(tr, fmtInt(f.completed), "completed", f.completed);
    cell(tr, fmtInt(f.failed), "failed", f.failed);
    cell(tr, fmtRate(f.rate), "rate");
    rows.appendChild(tr);
  }
  tbody.textContent = "";
  tbody.appendChild(rows);
  const first = page.functions.length ? page.offset + 1 : 0;
  const last = page.offset + page.functions.length;
  const range = $("page-range");
  range.textContent = fmtInt(first) + "–" + fmtInt(last) + " of " + fmtInt(page.total);
  range.dataset.total = page.total;
  $("prev").disabled = page.offset === 0;
  $("next").disabled = last >= page.total;
  $("empty").hidden = page.total > 0;
  for (const th of $("functions").tHead.rows[0].cells) {
    th.classList.toggle("sorted", th.dataset.sort === view.sort);
    th.classList.toggle("desc", th.dataset.sort === view.sort && view.desc);
  }
  markLoaded("functions");
}

// setView changes the view, keeps it in the URL, and reloads the table.
function setView(change) {
  Object.assign(view, change);
  const q = query();
  history.replaceState(null, "", q ? "?" + q : location.pathname);
  refreshFunctions();
}

let searchTimer = 0;
$("search").value = view.q;
$("search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => setView({ q: $("search").value, offset: 0 }), 250);
});
$("prev").addEventListener("click", () => setView({ offset: Math.max(0, view.offset - view.limit) }));
$("next").addEventListener("click", () => setView({ offset: view.offset + view.limit }));
for (const th of $("functions").tHead.rows[0].cells) {
  th.addEventListener("click", () => {
    const key = th.dataset.sort;
    // Names read best A to Z, numbers largest first.
    const desc = key === view.sort ? !view.desc : key !== "name";
    setView({ sort: key, desc: desc, offset: 0 });
  });
}

refreshOverview();
refreshFunctions();
refreshCluster();
setInterval(refreshOverview, 2000);
setInterval(refreshCluster, 2000);
setInterval(refreshFunctions, 3000);
