// switchyard's status page: reads /api/overview every 2 s and one page of
// /api/functions, /api/connections and /api/failures every 3 s. The server searches, sorts and pages the
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
const loaded = { overview: false, functions: false, conns: false, failures: false };
let actionsOn = false;

function markLoaded(part) {
  loaded[part] = true;
  if (loaded.overview && loaded.functions && loaded.conns && loaded.failures) {
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
  if (actionsOn !== o.actions) {
    actionsOn = o.actions;
    for (const el of document.querySelectorAll(".acts")) el.hidden = !actionsOn;
  }
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
    cell(tr, f.oldest > 0 ? fmtSeconds(f.oldest) : "–", "oldest");
    cell(tr, fmtSeconds(f.wait.p99), "wait_p99");
    cell(tr, fmtSeconds(f.run.p99), "run_p99");
    tr.classList.toggle("stuck", f.stuck);
    tr.classList.toggle("paused", f.paused);
    tr.dataset.stuck = f.stuck ? "1" : "0";
    tr.dataset.paused = f.paused ? "1" : "0";
    const acts = cell(tr, "", "actions");
    acts.className = "acts";
    acts.hidden = !actionsOn;
    acts.appendChild(button(f.paused ? "resume" : "pause", "", () => act(f.paused ? "resume" : "pause", { function: f.name })));
    acts.appendChild(button("drop", "danger", () => {
      if (confirm("Drop every job waiting in " + f.name + "? Its running jobs stay.")) act("drop", { function: f.name });
    }));
    tr.cells[0].addEventListener("click", () => showDetail(f.name));
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

function button(text, cls, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.dataset.action = text;
  if (cls) b.className = cls;
  b.addEventListener("click", (e) => { e.stopPropagation(); onclick(); });
  return b;
}

function ago(t) {
  const d = new Date(t);
  return d.toLocaleTimeString();
}

// The function shown in detail: its first waiting jobs (each can be
// cancelled) and its failures.
let detailName = "";
function showDetail(name) {
  detailName = name;
  refreshDetail();
}
$("detail-close").addEventListener("click", () => { detailName = ""; $("detail").hidden = true; });

async function refreshDetail() {
  if (!detailName) return;
  let d;
  try {
    d = await getJSON("api/function?name=" + encodeURIComponent(detailName));
  } catch (e) {
    $("detail-summary").textContent = "(gone)";
    return;
  }
  const f = d.function;
  $("detail").hidden = false;
  $("detail-name").textContent = f.name;
  $("detail-summary").textContent = "(" + fmtInt(f.total) + " jobs, " + fmtInt(f.running) + " running, " +
    fmtInt(f.workers) + " workers" + (f.paused ? ", paused" : "") + "; wait p50 " + fmtSeconds(f.wait.p50) +
    ", p99 " + fmtSeconds(f.wait.p99) + "; run p50 " + fmtSeconds(f.run.p50) + ", p99 " + fmtSeconds(f.run.p99) + ")";
  const wb = $("waiting").tBodies[0];
  wb.textContent = "";
  for (const j of d.waiting) {
    const tr = document.createElement("tr");
    tr.dataset.job = j.id;
    cell(tr, String(j.id));
    cell(tr, j.unique || "–");
    cell(tr, j.priority);
    cell(tr, fmtSeconds(j.wait));
    cell(tr, fmtInt(j.retries));
    cell(tr, fmtInt(j.clients));
    const acts = cell(tr, "", "actions");
    acts.className = "acts";
    acts.hidden = !actionsOn;
    acts.appendChild(button("cancel", "danger", () => act("cancel", { id: j.id })));
    wb.appendChild(tr);
  }
  fillFailures($("detail-failures").tBodies[0], d.failures, false);
  $("detail").dataset.loaded = "1";
}

function fillFailures(tbody, failures, withFunction) {
  tbody.textContent = "";
  for (const f of failures) {
    const tr = document.createElement("tr");
    tr.dataset.failure = f.id;
    cell(tr, ago(f.at));
    if (withFunction) cell(tr, f.function, "function").classList.add("mono");
    if (withFunction) cell(tr, f.protocol || "–");
    cell(tr, String(f.id));
    cell(tr, f.kind + (f.retried ? " (retried)" : ""), "kind");
    cell(tr, f.worker || "–");
    const td = cell(tr, f.text || "–", "text");
    td.classList.add("name");
    td.title = f.text;
    tbody.appendChild(tr);
  }
}

async function refreshFailures() {
  let p;
  try {
    p = await getJSON("api/failures?limit=50");
  } catch (e) {
    return;
  }
  fillFailures($("failures").tBodies[0], p.failures, true);
  $("failures-count").textContent = "(" + fmtInt(p.total) + " kept, newest first)";
  $("failures-none").hidden = p.total > 0;
  markLoaded("failures");
}

// The connections' view: search, order and page, kept apart from the
// functions'.
const cview = { q: "", sort: "", desc: false, offset: 0, limit: 50, workers: false };
async function refreshConns() {
  const p = new URLSearchParams();
  if (cview.q) p.set("q", cview.q);
  if (cview.sort) p.set("sort", cview.sort);
  if (cview.desc) p.set("desc", "1");
  if (cview.workers) p.set("workers", "1");
  p.set("offset", String(cview.offset));
  p.set("limit", String(cview.limit));
  let page;
  try {
    page = await getJSON("api/connections?" + p.toString());
  } catch (e) {
    return;
  }
  const tbody = $("conns").tBodies[0];
  const rows = document.createDocumentFragment();
  for (const c of page.connections) {
    const tr = document.createElement("tr");
    tr.dataset.conn = c.protocol + ":" + c.fd + ":" + c.id;
    cell(tr, c.protocol, "protocol");
    cell(tr, c.fd < 0 ? "–" : String(c.fd), "fd");
    cell(tr, c.peer, "peer");
    cell(tr, c.id || "–", "id");
    cell(tr, c.worker ? c.functions.join(" ") : "(client)", "functions").classList.add("name");
    cell(tr, c.jobs.map((j) => j.function + " #" + j.id + (j.for === null ? "" : " for " + fmtSeconds(j.for))).join(", ") || "–", "holding").classList.add("name");
    cell(tr, c.held_for === null ? "–" : fmtSeconds(c.held_for), "held_for");
    cell(tr, c.idle === null ? "–" : fmtSeconds(c.idle), "idle");
    cell(tr, fmtInt(c.bytes), "bytes", c.bytes);
    rows.appendChild(tr);
  }
  tbody.textContent = "";
  tbody.appendChild(rows);
  const first = page.connections.length ? page.offset + 1 : 0;
  const last = page.offset + page.connections.length;
  $("conns-range").textContent = fmtInt(first) + "–" + fmtInt(last) + " of " + fmtInt(page.total);
  $("conns-count").textContent = "(" + fmtInt(page.workers) + " workers)";
  $("conns-prev").disabled = page.offset === 0;
  $("conns-next").disabled = last >= page.total;
  for (const th of $("conns").tHead.rows[0].cells) {
    th.classList.toggle("sorted", !!th.dataset.sort && th.dataset.sort === cview.sort);
    th.classList.toggle("desc", !!th.dataset.sort && th.dataset.sort === cview.sort && cview.desc);
  }
  markLoaded("conns");
}

let connsTimer = 0;
$("conns-search").addEventListener("input", () => {
  clearTimeout(connsTimer);
  connsTimer = setTimeout(() => { cview.q = $("conns-search").value; cview.offset = 0; refreshConns(); }, 250);
});
$("conns-workers").addEventListener("change", () => { cview.workers = $("conns-workers").checked; cview.offset = 0; refreshConns(); });
$("conns-prev").addEventListener("click", () => { cview.offset = Math.max(0, cview.offset - cview.limit); refreshConns(); });
$("conns-next").addEventListener("click", () => { cview.offset += cview.limit; refreshConns(); });
for (const th of $("conns").tHead.rows[0].cells) {
  if (!th.dataset.sort) continue;
  th.addEventListener("click", () => {
    const key = th.dataset.sort;
    const text = key === "protocol" || key === "peer" || key === "id";
    cview.desc = key === cview.sort ? !cview.desc : !text;
    cview.sort = key;
    cview.offset = 0;
    refreshConns();
  });
}

// Actions: POST /api/actions/NAME with the ops token in its header (kept
// for this tab only, in sessionStorage). The page asks for the token the
// first time, and again when the server turns it down.
function askToken(error) {
  return new Promise((resolve) => {
    const dlg = $("token-dialog");
    $("token-input").value = "";
    $("token-error").hidden = !error;
    $("token-error").textContent = error || "";
    const done = (v) => {
      $("token-form").onsubmit = null;
      $("token-cancel").onclick = null;
      dlg.close();
      resolve(v);
    };
    $("token-form").onsubmit = (e) => { e.preventDefault(); done($("token-input").value.trim()); };
    $("token-cancel").onclick = () => done("");
    dlg.showModal();
    $("token-input").focus();
  });
}

function toast(text, bad) {
  const t = $("toast");
  t.textContent = text;
  t.className = bad ? "bad" : "";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}

async function act(action, body) {
  let token = sessionStorage.getItem("switchyard-token") || "";
  let error = "";
  for (let tries = 0; tries < 3; tries++) {
    if (!token) {
      token = await askToken(error);
      if (!token) {
        document.body.dataset.lastAction = action + ":cancelled";
        return;
      }
    }
    const resp = await fetch("api/actions/" + action, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Switchyard-Token": token },
      body: JSON.stringify(body),
    });
    let r = {};
    try { r = await resp.json(); } catch (e) { /* not JSON */ }
    document.body.dataset.lastAction = action + ":" + resp.status;
    if (resp.status === 401) {
      sessionStorage.removeItem("switchyard-token");
      token = "";
      error = "The server turned that token down.";
      continue;
    }
    if (!resp.ok) {
      toast(action + ": " + (r.error || resp.status), true);
      return;
    }
    sessionStorage.setItem("switchyard-token", token);
    toast(action + " done" + (r.dropped !== undefined ? ": " + r.dropped + " jobs dropped" : ""));
    refreshFunctions();
    refreshDetail();
    return;
  }
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
  if (!th.dataset.sort) continue;
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
refreshConns();
refreshFailures();
setInterval(refreshOverview, 2000);
setInterval(refreshCluster, 2000);
setInterval(refreshFunctions, 3000);
setInterval(refreshConns, 3000);
setInterval(refreshFailures, 3000);
setInterval(refreshDetail, 3000);
