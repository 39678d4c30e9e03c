// Usage: tokens, cost and latency over time and per model, drawn with the
// vendored uPlot (vendor/uPlot.esm.js) from GET /ui/api/usage?days=N.
// by_day rows are one a day and model; the charts sum tokens over models,
// draw cost per model and the p50/p95 turn latency per model; by_model is
// a table with proportional bars. Route: #/usage[?days=N].

import uPlot from "../../vendor/uPlot.esm.js";
import { h, clear } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { hashFor } from "../router.js";
import { pageHeader, table, empty } from "../widgets.js";

const RANGES = [7, 30, 90];
const PALETTE = ["#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];

// "2026-12-05" -> unix seconds at local midnight (uPlot's x unit).
function dayToSec(day) {
  const m = /^(\d{4})-(\d{2})-(\d{2})/.exec(String(day));
  if (m) return new Date(+m[1], +m[2] - 1, +m[3]).getTime() / 1000;
  const n = Number(day);
  return Number.isFinite(n) ? (n > 1e11 ? n / 1000 : n) : NaN;
}

// Every UTC day of the range, oldest first, as the server names them
// ("YYYY-MM-DD"), so that days without turns are drawn as such.
function rangeDays(days, now = Date.now()) {
  const out = [];
  for (let i = days - 1; i >= 0; i--) out.push(new Date(now - i * 86400e3).toISOString().slice(0, 10));
  return out;
}

function pivot(rows, range) {
  const days = [...new Set([...range, ...rows.map((r) => String(r.day))])].sort();
  const models = [...new Set(rows.map((r) => String(r.model || "unknown")))].sort();
  const at = new Map(rows.map((r) => [String(r.day) + "\u0000" + String(r.model || "unknown"), r]));
  return { days, models, get: (d, m) => at.get(d + "\u0000" + m) };
}

function chartBox(title, testid) {
  const plot = h("div.chart-plot");
  const fig = h("figure.chart", { "data-testid": testid }, h("figcaption", title), plot);
  return { fig, plot };
}

export async function render(root, params) {
  const days = RANGES.includes(Number(params.days)) ? Number(params.days) : 30;
  const picker = h("div.segmented", { role: "group", "aria-label": "Time range" },
    RANGES.map((d) => h("a.btn.small" + (d === days ? ".active" : ""), {
      href: hashFor("usage", null, { days: d }), "aria-current": d === days ? "true" : null,
    }, "Last " + d + " days")));
  root.appendChild(pageHeader("Usage", picker));

  const res = await api.get("/ui/api/usage", { days });
  const byDay = Array.isArray(res.by_day) ? res.by_day : [];
  const byModel = Array.isArray(res.by_model) ? res.by_model : [];
  if (!byDay.length && !byModel.length) {
    root.appendChild(empty("No turns in the last " + days + " days."));
    return;
  }

  const totals = byModel.reduce((t, m) => ({
    turns: t.turns + (Number(m.turns) || 0),
    input: t.input + (Number(m.input_tokens) || 0),
    output: t.output + (Number(m.output_tokens) || 0),
    cost: m.cost_usd === null || m.cost_usd === undefined ? t.cost : (t.cost ?? 0) + Number(m.cost_usd),
  }), { turns: 0, input: 0, output: 0, cost: null });
  root.appendChild(h("div.stats", { "data-testid": "usage-totals" },
    stat("Turns", fmt.int(totals.turns)), stat("Input tokens", fmt.compact(totals.input)),
    stat("Output tokens", fmt.compact(totals.output)), stat("Cost", fmt.usd(totals.cost))));

  const charts = [];
  const grid = h("div.charts");
  root.appendChild(grid);
  if (byDay.length) {
    const p = pivot(byDay, rangeDays(days));
    const xs = p.days.map(dayToSec);
    const sum = (field) => p.days.map((d) => p.models.reduce((a, m) => a + (Number((p.get(d, m) || {})[field]) || 0), 0));
    const perModel = (field) => p.models.map((m) => p.days.map((d) => {
      const r = p.get(d, m);
      const v = r ? r[field] : null;
      return v === null || v === undefined || !Number.isFinite(Number(v)) ? null : Number(v);
    }));

    const tok = chartBox("Tokens per day", "chart-tokens");
    grid.appendChild(tok.fig);
    charts.push([tok.plot, {
      series: [daySeries(), line("Input", PALETTE[0], fmt.int), line("Output", PALETTE[1], fmt.int)],
      axes: axes(fmt.compact),
    }, [xs, sum("input_tokens"), sum("output_tokens")]]);

    const cost = chartBox("Cost per day (USD) by model", "chart-cost");
    grid.appendChild(cost.fig);
    charts.push([cost.plot, {
      series: [daySeries(), ...p.models.map((m, i) => line(m, PALETTE[i % PALETTE.length], fmt.usd))],
      axes: axes((v) => "$" + (v < 1 ? v.toFixed(3) : v.toFixed(2))),
    }, [xs, ...perModel("cost_usd")]]);

    const lat = chartBox("Turn latency (ms), p50 solid, p95 dashed", "chart-latency");
    grid.appendChild(lat.fig);
    const p50 = perModel("latency_ms_p50"), p95 = perModel("latency_ms_p95");
    charts.push([lat.plot, {
      series: [daySeries(), ...p.models.flatMap((m, i) => [
        line(m + " p50", PALETTE[i % PALETTE.length], (v) => fmt.int(v) + " ms"),
        { ...line(m + " p95", PALETTE[i % PALETTE.length], (v) => fmt.int(v) + " ms"), dash: [6, 4] }])],
      axes: axes((v) => fmt.compact(v)),
    }, [xs, ...p.models.flatMap((m, i) => [p50[i], p95[i]])]]);

    const turns = chartBox("Turns per day", "chart-turns");
    grid.appendChild(turns.fig);
    charts.push([turns.plot, {
      series: [daySeries(), { ...line("Turns", PALETTE[2], fmt.int), fill: "rgba(5,150,105,0.15)" }],
      axes: axes(fmt.compact),
    }, [xs, sum("turns")]]);
  }

  if (byModel.length) {
    root.appendChild(h("h2", "Per model"));
    const maxTok = Math.max(1, ...byModel.map((m) => (Number(m.input_tokens) || 0) + (Number(m.output_tokens) || 0)));
    const maxCost = Math.max(0, ...byModel.map((m) => Number(m.cost_usd) || 0));
    root.appendChild(h("div", { "data-testid": "usage-by-model" }, table([
      { label: "Model", value: (m) => h("span.mono", String(m.model || "unknown")) },
      { label: "Turns", cls: "num", value: (m) => fmt.int(m.turns) },
      { label: "Input tokens", cls: "num", value: (m) => fmt.int(m.input_tokens) },
      { label: "Output tokens", cls: "num", value: (m) => fmt.int(m.output_tokens) },
      { label: "Tokens", cls: "bar-cell", value: (m) => bar(((Number(m.input_tokens) || 0) + (Number(m.output_tokens) || 0)) / maxTok) },
      { label: "Cost", cls: "num", value: (m) => fmt.usd(m.cost_usd) },
      { label: "Share of cost", cls: "bar-cell", value: (m) => maxCost > 0 && m.cost_usd !== null ? bar((Number(m.cost_usd) || 0) / maxCost, "cost") : h("span.muted", "–") },
    ], byModel, { caption: "Usage per model" })));
  }

  // Draw once the figures are laid out (uPlot needs a width).
  const plots = [];
  const draw = () => {
    for (const p of plots) p.destroy();
    plots.length = 0;
    for (const [el, opts, data] of charts) {
      clear(el);
      const width = Math.max(280, el.clientWidth || 560);
      plots.push(new uPlot({ width, height: 220, legend: { show: true }, cursor: { drag: { x: false, y: false } },
        // Every quantity here is a count, a cost or a duration: the y axis starts at 0.
        scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 1] } },
        ...opts }, data, el));
    }
  };
  requestAnimationFrame(draw);
  let resizeTimer = null;
  const onResize = () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(draw, 150); };
  window.addEventListener("resize", onResize);
  return () => {
    window.removeEventListener("resize", onResize);
    clearTimeout(resizeTimer);
    for (const p of plots) p.destroy();
  };
}

function stat(label, value) {
  return h("div.stat", h("div.stat-value", value), h("div.stat-label", label));
}

function daySeries() {
  return { label: "Day", value: (u, v) => (v === null || v === undefined ? "–" : new Date(v * 1000).toLocaleDateString("en-CA")) };
}

function line(label, stroke, valueFmt) {
  return { label, stroke, width: 2, points: { show: true, size: 5 }, spanGaps: false,
           value: (u, v) => (v === null || v === undefined ? "–" : valueFmt(v)) };
}

function axes(valueFmt) {
  // Canvas text cannot use CSS colours by name: read the page's foreground.
  const fg = getComputedStyle(document.documentElement).getPropertyValue("--fg").trim() || "#1f2328";
  const grid = { stroke: "rgba(128,128,128,0.2)", width: 1 };
  return [
    { stroke: fg, grid, ticks: grid },
    { stroke: fg, grid, ticks: grid, size: 60, values: (u, vals) => vals.map((v) => valueFmt(v)) },
  ];
}

// A proportional bar; its width is set through the CSSOM (allowed by the
// CSP, unlike a style attribute).
function bar(fraction, kind = "") {
  const fill = h("span.bar-fill" + (kind ? "." + kind : ""));
  fill.style.width = Math.max(0, Math.min(100, fraction * 100)).toFixed(1) + "%";
  return h("span.bar", { "aria-hidden": "true" }, fill);
}
