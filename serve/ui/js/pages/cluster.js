// Cluster: the members of the cluster this node serves (GET /ui/api/cluster):
// node, role, state, load, sessions per worker; or a line saying the node
// serves no cluster. Polled while shown. Route: #/cluster.

import { h, clear } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { pageHeader, table, badge, stateKind, statusLine, flash, empty, every, refreshButton } from "../widgets.js";

const POLL_MS = 5000;

function loadText(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return v <= 1 && v >= 0 && !Number.isInteger(v) ? Math.round(v * 100) + " %" : String(v);
  if (typeof v === "object") return Object.entries(v).map(([k, x]) => k + " " + x).join(", ");
  return String(v);
}

export async function render(root) {
  const loadStatus = statusLine();
  const body = h("div", { "data-testid": "cluster" });

  async function load() {
    const res = await api.get("/ui/api/cluster");
    clear(body);
    if (!res || !res.enabled) {
      body.appendChild(empty("This node serves no cluster: it runs its turns and kernels itself. "
        + "Start it with `mibyan serve --join HOST:PORT`, or run `mibyan dashboard --connect HOST:PORT`, to see a cluster here."));
      return;
    }
    const members = Array.isArray(res.members) ? res.members : [];
    const up = members.filter((m) => stateKind(m.state) === "good").length;
    body.appendChild(h("p.summary", members.length + " members, " + up + " up."));
    if (!members.length) { body.appendChild(empty("No member has joined yet.")); return; }
    body.appendChild(table([
      { label: "Node", value: (m) => h("div",
          h("span.mono", String(m.node ?? "")),
          res.node !== undefined && String(m.node) === String(res.node) ? [" ", badge("this gateway")] : null) },
      { label: "Address", value: (m) => h("span.mono.small", String(m.address || "–")) },
      { label: "Role", value: (m) => badge(String(m.role || "–")) },
      { label: "State", value: (m) => badge(String(m.state || "–"), stateKind(m.state)) },
      { label: "Load", cls: "num", value: (m) => loadText(m.load) },
      { label: "Sessions", cls: "num", value: (m) => (Array.isArray(m.sessions) ? fmt.int(m.sessions.length) : fmt.int(m.sessions))
          + (m.max_sessions ? " / " + fmt.int(m.max_sessions) : "") },
      { label: "Kernels", cls: "num", value: (m) => fmt.int(m.kernels) },
    ], members, { caption: "Cluster members" }));
  }

  const stop = every(POLL_MS, load, loadStatus);
  root.appendChild(pageHeader("Cluster", refreshButton(() => load().catch((e) => flash(loadStatus, "error", e.message)))));
  root.appendChild(loadStatus);
  root.appendChild(body);
  await stop.first;
  return stop;
}
