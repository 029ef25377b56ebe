"""The read-only web view served at ``/``: one self-contained page (no external assets: the
machine running it may be offline) whose script fetches the JSON API and draws every group's
state, members and assignments, Burrow's status and each partition's lag with an inline-SVG
sparkline of its recent history. Burrow's numbers (status, total and partition lags) come from
``/v3/kafka/{cluster}/consumer/{group}/lag``; state, members and lag history from
``/groupcoord/v1/groups``. It redraws every ``?refresh=S`` seconds (default 2; 0: never).
Text goes in through ``textContent`` only, so group and member names cannot inject markup.
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>groupcoord: consumer groups</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.OK { color: #1a7f37; } .WARN { color: #9a6700; }
.ERR, .STOP, .STALL, .REWIND { color: #cf222e; font-weight: bold; }
.NOTFOUND { color: #777; }
h2 { font-size: 1.1em; margin-bottom: 0.2em; }
svg.sparkline polyline { fill: none; stroke: #0969da; stroke-width: 1.5; }
#error { color: #cf222e; }
</style>
</head>
<body>
<h1>groupcoord <small id="cluster"></small></h1>
<p>Burrow's v3 API: <code>/v3/kafka</code>. <span id="updated"></span>
<span id="error"></span></p>
<table id="summary">
<thead><tr><th>group</th><th>state</th><th>members</th><th>status</th>
<th>total lag</th><th>complete</th></tr></thead>
<tbody></tbody>
</table>
<div id="groups"></div>
<script>
"use strict";
const refreshS = Number(new URLSearchParams(location.search).get("refresh") ?? "2");
let renders = 0;

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  return response.json();
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) {
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function lagText(lag) {
  return lag === null || lag === undefined ? "unknown" : String(lag);
}

function sparkline(values) {
  const ns = "http://www.w3.org/2000/svg";
  const w = 120, h = 24;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "sparkline");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  const known = values.map((v, i) => [i, v]).filter(([, v]) => v !== null);
  const top = Math.max(1, ...known.map(([, v]) => v));
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", known.map(([i, v]) =>
    `${(i * step).toFixed(1)},${(h - 2 - (v / top) * (h - 4)).toFixed(1)}`).join(" "));
  svg.append(line);
  return svg;
}

function groupSection(g, status) {
  const history = new Map(g.partitions.map(p => [`${p.topic}/${p.partition}`, p.history]));
  const members = el("table", { class: "members" },
    el("tr", {}, el("th", {}, "member"), el("th", {}, "client id"), el("th", {}, "host"),
       el("th", {}, "assignment")));
  for (const m of g.members) {
    members.append(el("tr", {}, el("td", {}, m.member_id), el("td", {}, m.client_id),
      el("td", {}, m.client_host),
      el("td", {}, m.assignment.map(([t, p]) => `${t}-${p}`).join(", "))));
  }
  const parts = el("table", { class: "partitions" },
    el("tr", {}, el("th", {}, "topic"), el("th", {}, "partition"), el("th", {}, "owner"),
       el("th", {}, "committed"), el("th", {}, "lag"), el("th", {}, "status"),
       el("th", {}, "lag history")));
  for (const p of status.partitions) {
    parts.append(el("tr", { class: "partition-row", "data-group": g.group,
                            "data-topic": p.topic, "data-partition": p.partition },
      el("td", {}, p.topic), el("td", { class: "num" }, p.partition),
      el("td", {}, p.client_id || ""),
      el("td", { class: "num offset" }, p.end ? p.end.offset : ""),
      el("td", { class: "num lag" }, lagText(p.current_lag)),
      el("td", { class: "pstatus " + p.status }, p.status),
      el("td", {}, sparkline(history.get(`${p.topic}/${p.partition}`) || []))));
  }
  return el("section", { "data-group": g.group },
    el("h2", {}, g.group), members, parts);
}

async function render() {
  const kafka = await getJSON("/v3/kafka");
  const cluster = kafka.clusters[0];
  const view = await getJSON("/groupcoord/v1/groups");
  const rows = [], sections = [];
  for (const g of view.groups) {
    const lag = await getJSON(`/v3/kafka/${encodeURIComponent(cluster)}/consumer/` +
                              `${encodeURIComponent(g.group)}/lag`);
    const s = lag.status;
    rows.push(el("tr", { class: "group-row", "data-group": g.group },
      el("td", {}, g.group), el("td", { class: "state" }, g.state),
      el("td", { class: "num members" }, g.members.length),
      el("td", { class: "status " + s.status }, s.status),
      el("td", { class: "num totallag" }, lagText(s.totallag)),
      el("td", { class: "num" }, Number(s.complete).toFixed(2))));
    sections.push(groupSection(g, s));
  }
  document.getElementById("cluster").textContent = "cluster " + cluster;
  document.querySelector("#summary tbody").replaceChildren(...rows);
  document.getElementById("groups").replaceChildren(...sections);
  document.getElementById("updated").textContent = "Updated " + new Date().toISOString();
  document.body.dataset.renders = String(++renders);
}

async function loop() {
  try {
    await render();
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "refresh failed: " + e;
  }
  if (refreshS > 0) setTimeout(loop, refreshS * 1000);
}
loop();
</script>
</body>
</html>
"""
