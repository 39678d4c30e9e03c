// Config: the node's effective configuration with secrets masked by the
// server, and the `config check` results (GET /ui/api/config). Read-only;
// a filter box narrows the keys shown. Route: #/config.

import { h, clear } from "../dom.js";
import * as api from "../api.js";
import { pageHeader, table, badge, stateKind, empty } from "../widgets.js";

// Flattens {a:{b:1}} into [["a.b", 1]]; arrays of scalars stay one value.
function flatten(value, prefix, out) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (!keys.length && prefix) out.push([prefix, value]);
    for (const k of keys) flatten(value[k], prefix ? prefix + "." + k : k, out);
  } else if (Array.isArray(value) && value.some((x) => x && typeof x === "object")) {
    if (!value.length) out.push([prefix, value]);
    value.forEach((x, i) => flatten(x, prefix + "[" + i + "]", out));
  } else {
    out.push([prefix, value]);
  }
  return out;
}

function valueNode(v) {
  if (v === null || v === undefined) return h("span.muted", "null");
  if (typeof v === "boolean") return h("span.mono", v ? "true" : "false");
  if (typeof v === "number") return h("span.mono", String(v));
  if (Array.isArray(v)) return h("span.mono", v.length ? JSON.stringify(v) : "[]");
  if (typeof v === "object") return h("span.mono", "{}");
  const s = String(v);
  if (/^\*+$|^\*{3}|masked|redacted|^•+$/i.test(s)) return h("span.mono.masked", s);
  return h("span.mono", s === "" ? "\"\"" : s);
}

export async function render(root) {
  const res = await api.get("/ui/api/config");
  const checks = Array.isArray(res.check) ? res.check : [];
  const rows = flatten(res.config || {}, "", []).sort((a, b) => a[0].localeCompare(b[0]));
  const filter = h("input#config-filter", { type: "search", placeholder: "Filter keys", "aria-label": "Filter configuration keys", autocomplete: "off" });

  root.appendChild(pageHeader("Config", filter));
  root.appendChild(h("p.muted", "The node's effective configuration (config.yaml, the environment and the flags, merged). "
    + "Secrets are masked by the server. Read-only: change config.yaml and restart the node."));

  if (res.home || res.config_file)
    root.appendChild(h("dl.meta",
      h("dt", "Home"), h("dd.mono", String(res.home || "–")),
      h("dt", "Config file"), h("dd.mono", res.config_file ? String(res.config_file) : "none (defaults)")));

  root.appendChild(h("h2", "Check"));
  if (!checks.length) {
    root.appendChild(h("p.notice.ok", { "data-testid": "config-check" }, "config check found nothing to report."));
  } else {
    const order = { error: 0, warning: 1, warn: 1, info: 2 };
    checks.sort((a, b) => (order[a.level] ?? 3) - (order[b.level] ?? 3));
    root.appendChild(h("div", { "data-testid": "config-check" }, table([
      { label: "Level", value: (c) => badge(String(c.level || ""), c.level === "error" ? "bad" : stateKind(c.level)) },
      { label: "Key", value: (c) => h("span.mono", String(c.key || "–")) },
      { label: "Message", value: (c) => String(c.message ?? "") },
    ], checks, { caption: "config check results" })));
  }

  root.appendChild(h("h2", "Effective configuration"));
  const body = h("div", { "data-testid": "config-values" });
  const draw = () => {
    const f = filter.value.trim().toLowerCase();
    const shown = f ? rows.filter(([k, v]) => k.toLowerCase().includes(f) || String(v).toLowerCase().includes(f)) : rows;
    clear(body);
    if (!shown.length) { body.appendChild(empty("No key matches.")); return; }
    body.appendChild(table([
      { label: "Key", cls: "key", value: (r) => h("span.mono", r[0]) },
      { label: "Value", value: (r) => valueNode(r[1]) },
    ], shown, { caption: "Configuration values", cls: "config" }));
  };
  filter.addEventListener("input", draw);
  draw();
  root.appendChild(body);

  const env = res.env && typeof res.env === "object" ? Object.entries(res.env) : [];
  if (env.length) {
    root.appendChild(h("h2", "Variables from .env"));
    root.appendChild(table([
      { label: "Name", cls: "key", value: (r) => h("span.mono", r[0]) },
      { label: "Value", value: (r) => valueNode(r[1]) },
    ], env.sort((a, b) => a[0].localeCompare(b[0])), { caption: "Variables from $MIBYAN_HOME/.env (masked)", cls: "config" }));
  }
}
