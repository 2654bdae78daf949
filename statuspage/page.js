"use strict";
// Renders the JSON at "leases" (next to the page) every second. Every
// value goes into the page with textContent or title only, never as HTML.
const refreshEvery = 1000;

// fill replaces the rows of table id with one row per item: make(item)
// returns its cells, each a string or {text, cls, title}; rowClass(item)
// its class. empty shows when there are no items.
function fill(id, items, make, empty, rowClass) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of items) {
    const tr = body.insertRow();
    if (rowClass) tr.className = rowClass(item) || "";
    for (const cell of make(item)) {
      const td = tr.insertCell();
      const c = typeof cell === "string" ? {text: cell} : cell;
      td.textContent = c.text;
      if (c.cls) td.className = c.cls;
      if (c.title) td.title = c.title;
    }
  }
  if (items.length === 0) {
    const td = body.insertRow().insertCell();
    td.colSpan = body.parentElement.tHead.rows[0].cells.length;
    td.className = "muted";
    td.textContent = empty;
  }
}

const pad = (n, w) => String(n).padStart(w || 2, "0");
// stamp formats an RFC 3339 time as local "2026-12-01 22:50:01.123".
function stamp(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3);
}
// span formats s seconds as "1.2s", or "59m48s" from a minute on.
function span(s) {
  if (s < 60) return s.toFixed(1) + "s";
  const m = Math.floor(s / 60);
  return (m >= 60 ? Math.floor(m / 60) + "h" + pad(m % 60) + "m" : m + "m") + pad(Math.floor(s % 60)) + "s";
}
// rel says how far iso is from now: "in 1.2s" or "0.4s ago".
function rel(iso, now) {
  const s = (new Date(iso) - new Date(now)) / 1000;
  return s >= 0 ? "in " + span(s) : span(-s) + " ago";
}
function when(iso, now) {
  return iso ? {text: stamp(iso) + " (" + rel(iso, now) + ")", cls: "num", title: iso} : "-";
}
// token shows the last 6 digits of a token, all of it on hover.
function token(t) {
  return t ? {text: t.length > 6 ? "…" + t.slice(-6) : t, cls: "num", title: t} : "-";
}
function who(holder, token, me) {
  return holder ? holder + (holder === me ? " (this instance)" : "") + (token ? " #" + (token.length > 6 ? "…" + token.slice(-6) : token) : "") : "-";
}

function render(d) {
  document.getElementById("holder").textContent = d.holder ? "· " + d.holder : "";
  document.getElementById("about").textContent =
    (d.holder ? "instance " + d.holder + " · " : "") + "updated " + stamp(d.now);
  fill("leases", d.leases || [], l => [
    l.name,
    l.free ? {text: "free", cls: "muted"} : who(l.holder, "", d.holder),
    token(l.token),
    l.ttl || "-",
    l.free ? "-" : when(l.renewed, d.now),
    l.free ? "-" : Object.assign(when(l.expires, d.now), l.expired ? {cls: "num bad"} : {}),
    {text: (l.waiting || []).map(c => [c.holder, c.job && "(" + c.job + ")"].filter(Boolean).join(" ")).join(", ") || "-", cls: "wrap"},
  ], d.error ? "cannot read the leases" : "no leases yet",
  l => l.expired ? "expired" : (!l.free && d.holder && l.holder === d.holder ? "mine" : ""));
  document.getElementById("group").hidden = !d.members;
  fill("members", d.members || [], m => [
    who(m.holder, "", d.holder),
    m.since ? {text: stamp(m.since), cls: "num", title: m.since} : "-",
    {text: String(m.leases.length), cls: "num"},
    {text: m.leases.join(", ") || "-", cls: "wrap"},
    m.draining ? {text: "draining", cls: "bad"} : "-",
  ], "no members seen yet", m => m.self ? "mine" : "");
  fill("handoffs", d.handoffs || [], h => [
    {text: stamp(h.at), cls: "num", title: "between " + stamp(h.after) + " and " + stamp(h.at)},
    h.lease,
    {text: h.from ? who(h.from, h.from_token, d.holder) : "-", title: h.from_token || ""},
    h.released ? {text: "released", cls: "muted"} : {text: who(h.to, h.to_token, d.holder), title: h.to_token || ""},
  ], "none seen yet");
  fill("jobs", d.jobs || [], j => {
    const r = j.last_run || {};
    return [
      j.lease,
      j.job,
      j.leading ? {text: "yes", cls: "ok"} : "no",
      token(j.token),
      j.since ? {text: stamp(j.since), cls: "num", title: j.since} : "-",
      j.trust_remaining_seconds != null ? {text: j.trust_remaining_seconds.toFixed(1) + "s", cls: "num"} : "-",
      j.healthy ? {text: "healthy", cls: "ok"} : {text: j.health, cls: "bad wrap"},
      !j.last_run ? "-" : r.ended ? {text: stamp(r.started) + " for " + r.duration, cls: "num", title: "ended " + r.ended}
        : r.started ? {text: stamp(r.started) + " (running)", cls: "num"} : "not yet",
      r.error ? {text: stamp(r.error_at) + ": " + r.error, cls: "bad wrap"} : "-",
    ];
  }, "no jobs", j => j.leading ? "mine" : "");
}

function problem(text) {
  const p = document.getElementById("error");
  p.textContent = text;
  p.hidden = !text;
  document.body.classList.toggle("stale", !!text);
}

async function refresh() {
  try {
    const r = await fetch("leases", {cache: "no-store"});
    const d = await r.json();
    render(d);
    problem(d.error ? "cannot read the leases: " + d.error : "");
  } catch (e) {
    problem("cannot reach this instance (" + e.message + "); showing what it last said");
  }
  setTimeout(refresh, refreshEvery);
}
refresh();
