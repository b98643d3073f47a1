// render.mjs draws docs/grafana-dashboard.json as a static HTML page, from
// a Prometheus that scraped a real run: every panel's PromQL expressions
// are evaluated by that Prometheus (query_range), with $name and $group
// set to All, and drawn as inline SVG in the dashboard's grid layout. No
// dependencies: node 18 or later. screenshot.sh runs it; see there.
//
//	node render.mjs PROMETHEUS_URL START END OUT.html [DASHBOARD.json]
//
// START and END are Unix times in seconds. It fails on any query error, so
// it also checks that every expression of the dashboard is valid PromQL.

import { readFileSync, writeFileSync } from "node:fs";

const [prom, startArg, endArg, out, dashPath = new URL("../grafana-dashboard.json", import.meta.url)] = process.argv.slice(2);
if (!prom || !startArg || !endArg || !out) {
  console.error("usage: node render.mjs PROMETHEUS_URL START END OUT.html [DASHBOARD.json]");
  process.exit(2);
}
const start = Number(startArg), end = Number(endArg);
const step = Math.max(1, Math.round((end - start) / 300));
// Grafana's $__rate_interval is max(4 × scrape interval, step + scrape
// interval); the run is scraped every second.
const rateInterval = `${Math.max(4, step + 1)}s`;
const dash = JSON.parse(readFileSync(dashPath, "utf8"));

const expand = (expr) =>
  expr.replaceAll("$__rate_interval", rateInterval).replaceAll("$name", ".*").replaceAll("$group", ".*");

async function queryRange(expr) {
  const u = new URL("/api/v1/query_range", prom);
  u.search = new URLSearchParams({ query: expand(expr), start, end, step }).toString();
  const res = await fetch(u);
  const body = await res.json();
  if (body.status !== "success") {
    throw new Error(`query ${expr}: ${body.errorType}: ${body.error}`);
  }
  return body.data.result;
}

// Grafana's classic palette, first colours.
const palette = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0", "#37872d", "#fade2a"];
const colourOf = { green: "#73bf69", red: "#f2495c", orange: "#ff9830", yellow: "#fade2a" };

function fmt(v, unit, decimals) {
  if (v == null || Number.isNaN(v)) return "–";
  const si = (x, suffixes, base) => {
    let i = 0;
    while (Math.abs(x) >= base && i < suffixes.length - 1) { x /= base; i++; }
    return `${trim(x, decimals)}${suffixes[i]}`;
  };
  switch (unit) {
    case "percentunit": return `${trim(v * 100, decimals)}%`;
    case "bytes": return si(v, [" B", " KiB", " MiB", " GiB", " TiB"], 1024);
    case "Bps": return si(v, [" B/s", " KiB/s", " MiB/s", " GiB/s"], 1024);
    case "ops": return si(v, [" ops/s", "K ops/s", "M ops/s"], 1000);
    case "s":
      if (v === 0) return "0 s";
      if (Math.abs(v) < 1e-3) return `${trim(v * 1e6, decimals)} µs`;
      if (Math.abs(v) < 1) return `${trim(v * 1e3, decimals)} ms`;
      if (Math.abs(v) < 120) return `${trim(v, decimals)} s`;
      return `${trim(v / 60, decimals)} min`;
    default: return si(v, ["", "K", "M", "G"], 1000);
  }
}

function trim(x, decimals) {
  if (decimals != null) return x.toFixed(decimals);
  const a = Math.abs(x);
  return (a >= 100 || Number.isInteger(x) ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2)).replace(/\.0+$/, "");
}

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const legendOf = (fmtStr, metric) =>
  (fmtStr || JSON.stringify(metric)).replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k) => metric[k] ?? "").replace(/\s+/g, " ").trim();

// niceTicks picks about n round tick values over [lo, hi].
// With decimals 0 the ticks are whole numbers; in bytes they are round in
// KiB, MiB or GiB. The axis ends on the first tick at or above hi.
function niceTicks(lo, hi, decimals, unit, n = 4) {
  if (hi <= lo) hi = lo + 1;
  const scale = unit === "bytes" || unit === "Bps" ? 1024 ** Math.max(0, Math.floor(Math.log(hi - lo) / Math.log(1024))) : 1;
  const raw = (hi - lo) / scale / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  let stepv = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) * scale;
  if (decimals === 0) stepv = Math.max(1, Math.round(stepv));
  const ticks = [];
  let t = Math.floor(lo / stepv) * stepv;
  for (; t < hi - stepv * 1e-9; t += stepv) ticks.push(+t.toPrecision(12));
  ticks.push(+t.toPrecision(12));
  return { ticks, lo: ticks[0], hi: ticks[ticks.length - 1] };
}

// legendLines is how many lines the legend takes: its entries (at most
// maxLegend, then "+N more") packed into the panel's width, at most 4.
const maxLegend = 8;
function legendLines(series, w) {
  let lines = 1, x = 0;
  for (const s of series.slice(0, maxLegend + 1)) {
    const ew = 26 + 6 * s.name.length; // the colour mark, the text at 10px, the gap
    if (x > 0 && x + ew > w) { lines++; x = 0; }
    x += ew;
  }
  return Math.min(lines, 4);
}

function timeseriesSVG(p, series, w, h) {
  const d = p.fieldConfig?.defaults ?? {};
  const unit = d.unit, legendH = legendLines(series, w) * 15 + 2;
  const padL = 62, padR = 10, padT = 6, padB = 18;
  const pw = w - padL - padR, ph = h - legendH - padT - padB;
  if (series.length === 0) {
    return `<div class="nodata">No data</div>`;
  }
  let lo = Infinity, hi = -Infinity;
  for (const s of series) for (const [, v] of s.values) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const thr = (d.thresholds?.steps ?? []).filter((s) => s.value != null);
  if (d.custom?.thresholdsStyle?.mode === "dashed") for (const t of thr) hi = Math.max(hi, t.value);
  if (d.min != null) lo = Math.min(lo, d.min);
  if (d.custom?.axisSoftMin != null) lo = Math.min(lo, d.custom.axisSoftMin);
  if (d.max != null) hi = d.max; // a hard maximum, as in Grafana
  const nt = niceTicks(lo, hi, d.decimals, unit);
  lo = nt.lo; hi = nt.hi;
  const X = (t) => padL + ((t - start) / (end - start)) * pw;
  const Y = (v) => padT + ph - ((v - lo) / (hi - lo)) * ph;
  let g = "";
  for (const t of nt.ticks) {
    g += `<line x1="${padL}" x2="${padL + pw}" y1="${Y(t)}" y2="${Y(t)}" class="grid"/>`;
    g += `<text x="${padL - 6}" y="${Y(t) + 4}" text-anchor="end">${esc(fmt(t, unit, d.decimals))}</text>`;
  }
  const tstep = (end - start) / 4;
  for (let i = 0; i <= 4; i++) {
    const t = start + i * tstep, dt = new Date(t * 1000);
    const label = `${String(dt.getUTCHours()).padStart(2, "0")}:${String(dt.getUTCMinutes()).padStart(2, "0")}:${String(dt.getUTCSeconds()).padStart(2, "0")}`;
    g += `<text x="${X(t)}" y="${padT + ph + 13}" text-anchor="${["start", "middle", "middle", "middle", "end"][i]}">${label}</text>`;
  }
  if (d.custom?.thresholdsStyle?.mode === "dashed") {
    for (const t of thr) {
      g += `<line x1="${padL}" x2="${padL + pw}" y1="${Y(t.value)}" y2="${Y(t.value)}" stroke="${colourOf[t.color] ?? t.color}" stroke-dasharray="6 4"/>`;
    }
  }
  let legend = "";
  series.forEach((s, i) => {
    const c = palette[i % palette.length];
    let path = "", pen = false, prevT = null;
    for (const [t, v] of s.values) {
      const gap = prevT != null && t - prevT > 2 * step; // Grafana breaks a line where samples are missing
      path += `${pen && !gap ? "L" : "M"}${X(t).toFixed(1)},${Y(v).toFixed(1)}`;
      pen = true; prevT = t;
    }
    if (s.values.length === 1) {
      const [t, v] = s.values[0];
      g += `<circle cx="${X(t)}" cy="${Y(v)}" r="2" fill="${c}"/>`;
    }
    g += `<path d="${path}" fill="none" stroke="${c}" stroke-width="1.5"/>`;
    if (i < maxLegend) legend += `<span class="lg"><i style="background:${c}"></i>${esc(s.name)}</span>`;
  });
  if (series.length > maxLegend) legend += `<span class="lg">+${series.length - maxLegend} more</span>`;
  return `<svg width="${w}" height="${h - legendH}" viewBox="0 0 ${w} ${h - legendH}">${g}</svg><div class="legend">${legend}</div>`;
}

function statHTML(p, series) {
  const d = p.fieldConfig?.defaults ?? {};
  if (series.length === 0) return `<div class="nodata">No data</div>`;
  const steps = d.thresholds?.steps ?? [];
  const cells = series.map((s) => {
    const v = s.values.length ? s.values[s.values.length - 1][1] : null;
    let colour = steps[0]?.color ?? "green";
    for (const st of steps) if (st.value != null && v >= st.value) colour = st.color;
    let text = fmt(v, d.unit, d.decimals);
    for (const m of d.mappings ?? []) {
      const hit = m.type === "value" && m.options?.[String(v)];
      if (hit) text = hit.text;
    }
    return `<div class="cell"><div class="sv" style="color:${colourOf[colour] ?? colour}">${esc(text)}</div><div class="sn">${esc(s.name)}</div></div>`;
  });
  return `<div class="stat">${cells.join("")}</div>`;
}

const W = 1400, margin = 8, unitH = 30, colW = (W - margin) / 24;
const box = (gp) => ({ x: margin + gp.x * colW, y: margin + gp.y * (unitH + margin), w: gp.w * colW - margin, h: gp.h * (unitH + margin) - margin });
let html = "", bottom = 0;
for (const p of dash.panels) {
  const b = box(p.gridPos);
  bottom = Math.max(bottom, b.y + b.h);
  if (p.type === "row") {
    html += `<div class="row" style="left:${b.x}px;top:${b.y}px;width:${b.w}px">${esc(p.title.replace("$group", "All"))}</div>`;
    continue;
  }
  const series = [];
  for (const t of p.targets ?? []) {
    for (const r of await queryRange(t.expr)) {
      const values = r.values.map(([ts, v]) => [ts, Number(v)]).filter(([, v]) => Number.isFinite(v));
      if (values.length) series.push({ name: legendOf(t.legendFormat, r.metric), values });
    }
  }
  const bodyH = b.h - 28;
  const body = p.type === "stat" ? statHTML(p, series) : timeseriesSVG(p, series, b.w - 12, bodyH);
  html += `<div class="panel" style="left:${b.x}px;top:${b.y}px;width:${b.w}px;height:${b.h}px"><div class="title">${esc(p.title)}</div>${body}</div>`;
}

const when = new Date(start * 1000).toISOString().replace("T", " ").slice(0, 19);
writeFileSync(out, `<!doctype html><html><head><meta charset="utf-8"><title>${esc(dash.title)}</title><style>
body{margin:0;background:#111217;color:#ccccdc;font:12px "DejaVu Sans",Arial,sans-serif}
.head{height:34px;line-height:34px;padding:0 12px;font-size:15px;border-bottom:1px solid #2c3235}
.head small{color:#8e8e9e;font-size:12px;margin-left:12px}
.board{position:relative;height:${bottom + margin}px}
.panel{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px;box-sizing:border-box;padding:0 6px;overflow:hidden}
.title{height:26px;line-height:26px;font-weight:600;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.row{position:absolute;height:30px;line-height:30px;font-size:14px;font-weight:600}
svg text{fill:#9fa7b3;font-size:10px}
.grid{stroke:#2c3235}
.legend{font-size:10px;line-height:15px;max-height:60px;overflow:hidden}
.lg{display:inline-block;margin-right:10px;white-space:nowrap}
.lg i{display:inline-block;width:12px;height:3px;margin:0 4px 3px 0;vertical-align:middle}
.nodata{color:#8e8e9e;text-align:center;margin-top:20%}
.stat{display:flex;flex-wrap:wrap;justify-content:space-around;align-items:center;height:calc(100% - 30px)}
.cell{text-align:center;padding:2px 6px}
.sv{font-size:26px;font-weight:500}
.sn{font-size:11px;color:#9fa7b3}
</style></head><body><div class="head">${esc(dash.title)}<small>channel = All, group = All · ${when} UTC + ${Math.round(end - start)} s · drawn by docs/dashboard/render.mjs from a real run's Prometheus</small></div><div class="board">${html}</div></body></html>
`);
console.log(`${out}: ${dash.panels.length} panels, ${bottom + margin + 35} px high`);
