// MCP servers: each configured server's state, its tools and its last
// error (GET /ui/api/mcp), with Reconnect (POST /ui/api/mcp/{name}/reconnect).
// Polled while shown. Route: #/mcp.

import { h, clear } from "../dom.js";
import * as api from "../api.js";
import { pageHeader, table, badge, stateKind, statusLine, flash, empty, every, refreshButton } from "../widgets.js";

const POLL_MS = 5000;

export async function render(root) {
  const status = statusLine();
  const loadStatus = statusLine();
  const body = h("div", { "data-testid": "mcp" });

  async function reconnect(name, button) {
    button.disabled = true;
    try {
      await api.post("/ui/api/mcp/" + api.seg(name) + "/reconnect");
      flash(status, "ok", "Reconnecting " + name + ".");
      await load();
    } catch (e) {
      flash(status, "error", "Reconnect of " + name + " failed: " + e.message);
    } finally {
      button.disabled = false;
    }
  }

  async function load() {
    const res = await api.get("/ui/api/mcp");
    const rows = Array.isArray(res.data) ? res.data : [];
    clear(body);
    if (!rows.length) {
      body.appendChild(empty("No MCP server is configured (mcp_servers in config.yaml, docs/mcp.md)."));
      return;
    }
    body.appendChild(table([
      { label: "Server", value: (s) => h("span.mono", String(s.name ?? "")) },
      { label: "Transport", value: (s) => h("span.small", String(s.transport || "–")) },
      // needs_login: an HTTP server waits for `mibyan mcp login NAME` (OAuth,
      // docs/mcp.md "Authorization"); the last error says so.
      { label: "State", value: (s) => badge(String(s.state || "–"), s.state === "needs_login" ? "warn" : stateKind(s.state)) },
      { label: "Tools", value: (s) => {
          const tools = Array.isArray(s.tools) ? s.tools.map(String) : [];
          if (!tools.length) return h("span.muted", "none");
          return h("details.tools", h("summary", tools.length + (tools.length === 1 ? " tool" : " tools")),
            h("ul.inline", tools.map((t) => h("li.mono.small", t))));
        } },
      { label: "Last error", value: (s) => s.last_error ? h("span.error-text", String(s.last_error)) : h("span.muted", "–") },
      { label: "Actions", cls: "actions", value: (s) => {
          const b = h("button.btn.small", { type: "button", "aria-label": "Reconnect " + s.name }, "Reconnect");
          b.addEventListener("click", () => reconnect(String(s.name), b));
          return b;
        } },
    ], rows, { caption: "MCP servers" }));
  }

  const stop = every(POLL_MS, load, loadStatus);
  root.appendChild(pageHeader("MCP servers", refreshButton(() => load().catch((e) => flash(loadStatus, "error", e.message)))));
  root.appendChild(status);
  root.appendChild(loadStatus);
  root.appendChild(body);
  await stop.first;
  return stop;
}
