// Small building blocks the pages share: page header, tables, badges,
// long-text blocks that collapse, a refresh loop. All text goes through
// dom.js (text nodes only).

import { h, clear } from "./dom.js";

export function pageHeader(title, ...extra) {
  return h("div.page-header", h("h1", title), h("div.page-actions", ...extra));
}

// columns: [{label, cls?, value: row => Node|string, sortable?}]
export function table(columns, rows, opts = {}) {
  const thead = h("thead", h("tr", columns.map((c) => h("th" + (c.cls ? "." + c.cls : ""), { scope: "col" }, c.label))));
  const tbody = h("tbody", rows.map((r, i) => {
    const tr = h("tr", columns.map((c) => h("td" + (c.cls ? "." + c.cls : ""), c.value(r, i))));
    if (opts.rowAttrs) for (const [k, v] of Object.entries(opts.rowAttrs(r))) tr.setAttribute(k, v);
    return tr;
  }));
  return h("div.table-wrap", h("table" + (opts.cls ? "." + opts.cls : ""),
    opts.caption ? h("caption.sr-only", opts.caption) : null, thead, tbody));
}

export function badge(text, kind = "") {
  return h("span.badge" + (kind ? "." + kind : ""), text);
}

// A state word -> badge colour class.
export function stateKind(state) {
  const s = String(state || "").toLowerCase();
  if (/^(ok|ready|running|connected|alive|up|leader|active|success|completed|answered|info)$/.test(s)) return "good";
  if (/^(starting|connecting|reconnecting|pending|joining|draining|warn|warning|suspect|idle)$/.test(s)) return "warn";
  if (/^(failed|error|dead|down|stopped|disconnected|unreachable|deny|denied|interrupted|left)$/.test(s)) return "bad";
  return "";
}

const LONG_CHARS = 1200;
const LONG_LINES = 24;

export function isLong(text) {
  const s = String(text ?? "");
  if (s.length > LONG_CHARS) return true;
  let lines = 1;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) === 10 && ++lines > LONG_LINES) return true;
  return false;
}

// A <pre> of `text`; when long, inside a closed <details> whose summary
// says how long it is and shows the first line.
export function textBlock(text, label = "", cls = "") {
  const s = String(text ?? "");
  const pre = h("pre.text" + (cls ? "." + cls : ""), s);
  if (!isLong(s)) return label ? h("div.block", h("div.block-label", label), pre) : pre;
  const first = s.split("\n", 1)[0].slice(0, 120);
  const lines = s.split("\n").length;
  return h("details.long" + (cls ? "." + cls : ""),
    h("summary",
      label ? h("span.block-label", label) : null,
      h("span.muted", " " + lines + " lines, " + s.length + " characters — "),
      h("code.first-line", first)),
    pre);
}

// Calls `load()` now and every `ms` while the page is shown; returns a
// stop function whose `first` property is the promise of the first load
// (a page awaits it, so the page counts as shown once its data is there).
// A load that throws shows its message in `statusEl`.
export function every(ms, load, statusEl) {
  let timer = null, stopped = false;
  const tick = async () => {
    if (stopped) return;
    try {
      await load();
      if (statusEl) { statusEl.hidden = true; clear(statusEl); }
    } catch (e) {
      if (statusEl) { statusEl.hidden = false; statusEl.className = "notice error"; statusEl.textContent = e.message; }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  const stop = () => { stopped = true; if (timer) clearTimeout(timer); };
  stop.first = tick();
  return stop;
}

export function statusLine() {
  const el = h("p.notice", { role: "status", "aria-live": "polite" });
  el.hidden = true;
  return el;
}

export function flash(el, kind, text) {
  el.hidden = false;
  el.className = "notice " + kind;
  el.setAttribute("role", kind === "error" ? "alert" : "status");
  el.textContent = text;
}

export function empty(text) {
  return h("p.empty", text);
}

export function refreshButton(onclick) {
  return h("button.btn.small", { type: "button", onclick }, "Refresh");
}
