// Kernels: the execute_code kernels alive now, one a session
// (GET /ui/api/kernels): pid, node, mode, sandbox, uptime, cells, memory;
// Reset (POST .../reset, the kernel's state is dropped) and Stop (POST
// .../stop), each after a confirmation. Polled while shown. Route: #/kernels.

import { h, clear, confirmDialog } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { sessionHash } from "../router.js";
import { pageHeader, table, badge, statusLine, flash, empty, every, refreshButton } from "../widgets.js";

const POLL_MS = 5000;

export async function render(root) {
  const status = statusLine();
  const loadStatus = statusLine();
  const body = h("div", { "data-testid": "kernels" });

  async function act(k, what) {
    const sid = String(k.session_id);
    const ok = await confirmDialog(what === "stop" ? "Stop kernel?" : "Reset kernel?",
      what === "stop"
        ? "Session " + sid + " is closed on this node: its kernels (pid " + k.pid + "), its conversation (the next turn reloads the "
          + "stored history), its session approvals and its background processes. Nothing stored is deleted."
        : "The kernels of session " + sid + " are ended: variables and imports are lost, and the next execute_code cell starts a "
          + "fresh kernel. The conversation stays.",
      what === "stop" ? "Stop" : "Reset");
    if (!ok) return;
    try {
      await api.post("/ui/api/kernels/" + api.seg(sid) + "/" + what);
      flash(status, "ok", (what === "stop" ? "Stopped" : "Reset") + " the kernel of " + sid + ".");
      await load();
    } catch (e) {
      flash(status, "error", (what === "stop" ? "Stop" : "Reset") + " failed: "
        + (e.status === 409 ? (what === "stop" ? "a turn of the session is running. " : "a cell is running. ") : "") + e.message);
    }
  }

  async function load() {
    const res = await api.get("/ui/api/kernels");
    const rows = Array.isArray(res.data) ? res.data : [];
    clear(body);
    if (!rows.length) { body.appendChild(empty("No kernel is running.")); return; }
    body.appendChild(table([
      { label: "Session", value: (k) => h("a.mono", { href: sessionHash(k.session_id) }, String(k.session_id)) },
      { label: "PID", cls: "num", value: (k) => String(k.pid ?? "–") },
      { label: "Node", value: (k) => h("span.mono.small", String(k.node || "local")) },
      { label: "Mode", value: (k) => [badge(String(k.mode || "–")), k.busy ? [" ", badge("running a cell", "warn")] : null] },
      { label: "Sandbox", value: (k) => badge(String(k.sandbox || "–"), /^(off|none)$/i.test(String(k.sandbox)) ? "warn" : "") },
      { label: "Uptime", cls: "num", value: (k) => fmt.duration(k.uptime_s) },
      { label: "Cells", cls: "num", value: (k) => fmt.int(k.cells) },
      { label: "Memory", cls: "num", value: (k) => fmt.bytes(k.rss_bytes) },
      { label: "Actions", cls: "actions", value: (k) => h("div.row-actions",
          h("button.btn.small", { type: "button", "aria-label": "Reset the kernel of " + k.session_id, onclick: () => act(k, "reset") }, "Reset"),
          h("button.btn.small.danger", { type: "button", "aria-label": "Stop the kernel of " + k.session_id, onclick: () => act(k, "stop") }, "Stop")) },
    ], rows, { caption: "Running kernels" }));
  }

  const stop = every(POLL_MS, load, loadStatus);
  root.appendChild(pageHeader("Kernels", refreshButton(() => load().catch((e) => flash(loadStatus, "error", e.message)))));
  root.appendChild(status);
  root.appendChild(loadStatus);
  root.appendChild(body);
  await stop.first;
  return stop;
}
