// Live: the turns running now, streamed from GET /ui/api/live (SSE). The
// first event, "snapshot", lists the running turns; then turn_start,
// delta {session_id, kind, text}, tool_start, tool_end, turn_end and
// approval events update the cards. Interrupt posts
// /ui/api/live/{session_id}/interrupt. EventSource reconnects by itself;
// each reconnection starts with a fresh snapshot. Route: #/live.

import { h, clear } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { sessionHash } from "../router.js";
import { pageHeader, badge, stateKind, textBlock, statusLine, flash, empty } from "../widgets.js";

const KEEP_FINISHED = 20;

export function render(root) {
  const conn = h("span.conn", { role: "status", "aria-live": "polite", "data-testid": "live-connection" }, "Connecting…");
  const status = statusLine();
  const approvals = h("div.approval-banner", { role: "alert" });
  approvals.hidden = true;
  const running = h("div.turns", { "data-testid": "live-turns", "aria-label": "Running turns" });
  const finished = h("div.turns.finished", { "aria-label": "Finished turns" });
  const none = empty("No turn is running. Turns appear here as soon as they start.");
  root.appendChild(pageHeader("Live", conn));
  root.appendChild(status);
  root.appendChild(approvals);
  root.appendChild(h("h2", "Running"));
  root.appendChild(none);
  root.appendChild(running);
  const finishedHeading = h("h2", "Finished while watching");
  finishedHeading.hidden = true;
  root.appendChild(finishedHeading);
  root.appendChild(finished);

  const cards = new Map(); // session_id -> card state
  const waiting = new Map(); // pending id -> {kind, session_id, text}

  function pendingEvent(d, key) {
    if (String(d.type || "").endsWith("_required") && d[key]) {
      const r = d[key];
      waiting.set(String(r.id), { kind: key, session_id: r.session_id, text: r.command ?? r.question ?? "" });
    } else if (d.id !== undefined) {
      waiting.delete(String(d.id));
    }
    clear(approvals);
    approvals.hidden = waiting.size === 0;
    if (!waiting.size) return;
    approvals.appendChild(h("p",
      waiting.size === 1 ? "Waiting for a person: " : waiting.size + " requests wait for a person. ",
      h("a.btn.small.primary", { href: "#/approvals" }, "Answer on the Approvals page")));
    approvals.appendChild(h("ul.reasons", [...waiting.values()].map((w) => h("li",
      w.kind === "approval" ? "command " : "question ", h("code", String(w.text)),
      w.session_id ? [" in ", h("a.mono", { href: sessionHash(w.session_id) }, String(w.session_id))] : null))));
  }

  const refreshEmpty = () => {
    none.hidden = running.childElementCount > 0;
    finishedHeading.hidden = finished.childElementCount === 0;
  };

  function card(turn) {
    const sid = String(turn.session_id ?? "");
    let c = cards.get(sid);
    if (c && !c.ended) return c;     // an ended card stays under "Finished"
    const output = h("pre.text.stream", { "data-testid": "live-output", "aria-live": "off" });
    const reasoning = h("pre.text.stream.reasoning-text");
    const reasoningBox = h("details.reasoning", h("summary", "Reasoning"), reasoning);
    reasoningBox.hidden = true;
    const tools = h("ol.live-tools", { "aria-label": "Tool calls" });
    const state = badge("running", "good");
    const interrupt = h("button.btn.small.danger", { type: "button", "data-testid": "interrupt" }, "Interrupt");
    const el = h("article.turn.card", { "data-session-id": sid, "data-testid": "live-turn" },
      h("div.turn-head",
        h("a.mono", { href: sessionHash(sid) }, sid),
        turn.source ? badge(String(turn.source)) : null,
        turn.model ? h("span.mono.small.muted", String(turn.model)) : null,
        h("span.small.muted", turn.started_at_ms ? "since " + fmt.time(turn.started_at_ms) : ""),
        state, interrupt),
      turn.prompt ? textBlock(String(turn.prompt), "Prompt", "prompt") : null,
      reasoningBox,
      h("div.block-label", "Output"),
      output,
      tools);
    c = { sid, el, output, reasoning, reasoningBox, tools, state, interrupt, toolRows: new Map(), ended: false };
    interrupt.addEventListener("click", async () => {
      interrupt.disabled = true;
      try {
        await api.post("/ui/api/live/" + api.seg(sid) + "/interrupt");
        interrupt.textContent = "Interrupting…";
      } catch (e) {
        interrupt.disabled = false;
        flash(status, "error", "Interrupt failed: " + e.message);
      }
    });
    cards.set(sid, c);
    running.prepend(el);
    refreshEmpty();
    return c;
  }

  function end(c, outcome) {
    if (c.ended) return;
    c.ended = true;
    c.state.textContent = String(outcome || "ended");
    c.state.className = "badge " + (stateKind(outcome) || (outcome === "answered" || outcome === "completed" ? "good" : ""));
    c.interrupt.remove();
    c.el.classList.add("ended");
    finished.prepend(c.el);
    while (finished.childElementCount > KEEP_FINISHED) finished.lastElementChild.remove();
    refreshEmpty();
  }

  const handlers = {
    snapshot(d) {
      const live = new Set();
      for (const t of (d && Array.isArray(d.turns) ? d.turns : [])) {
        live.add(String(t.session_id));
        card(t);
      }
      for (const c of cards.values()) if (!c.ended && !live.has(c.sid)) end(c, "ended");
    },
    turn_start(d) { card(d); },
    delta(d) {
      const c = card({ session_id: d.session_id });
      const text = String(d.text ?? "");
      if (d.kind === "reasoning") {
        c.reasoningBox.hidden = false;
        c.reasoning.appendChild(document.createTextNode(text));
      } else if (d.kind === "restart") {
        clear(c.output);
      } else {
        c.output.appendChild(document.createTextNode(text));
      }
    },
    tool_start(d) {
      const c = card({ session_id: d.session_id });
      const row = h("li.live-tool.running", { "data-testid": "live-tool" },
        h("span.tool-name", String(d.name || "tool")), " ",
        badge("running", "warn"),
        d.arguments !== undefined ? textBlock(fmt.prettyJson(d.arguments), "Arguments", "json") : null);
      c.toolRows.set(String(d.id), row);
      c.tools.appendChild(row);
    },
    tool_end(d) {
      const c = card({ session_id: d.session_id });
      let row = c.toolRows.get(String(d.id));
      if (!row) {
        row = h("li.live-tool", h("span.tool-name", String(d.name || "tool")), " ", badge("done"));
        c.tools.appendChild(row);
      }
      row.classList.remove("running");
      const b = row.querySelector(".badge");
      if (b) { b.textContent = "done " + fmt.micros(d.duration_us); b.className = "badge good"; }
      if (d.result !== undefined) row.appendChild(textBlock(fmt.contentText(d.result), "Result"));
    },
    turn_end(d) {
      const c = cards.get(String(d.session_id));
      if (c) end(c, d.outcome);
    },
    // This watcher fell behind and lost events: redraw from the running table.
    async lagged(d) {
      flash(status, "error", "The page fell behind and missed " + (d.lost ?? "some") + " events; the running turns were reloaded.");
      const res = await api.get("/ui/api/live/turns");
      handlers.snapshot({ turns: Array.isArray(res.data) ? res.data : [] });
    },
    // Pending approvals and questions ({type:"approval_required",
    // approval:{...}} / {type:"approval_resolved", id, outcome}, the same
    // with clarify): listed in a banner while they wait.
    approval(d) { pendingEvent(d, "approval"); },
    clarify(d) { pendingEvent(d, "clarification"); },
  };

  const es = new EventSource("/ui/api/live");
  es.addEventListener("open", () => { conn.textContent = "Connected"; conn.className = "conn ok"; });
  es.addEventListener("error", () => {
    conn.textContent = es.readyState === EventSource.CLOSED ? "Disconnected" : "Reconnecting…";
    conn.className = "conn bad";
    if (es.readyState === EventSource.CLOSED)
      flash(status, "error", "The live stream closed. Reload the page to connect again.");
  });
  for (const [name, fn] of Object.entries(handlers)) {
    es.addEventListener(name, (ev) => {
      let data;
      try { data = JSON.parse(ev.data); } catch (e) { return; }
      Promise.resolve().then(() => fn(data || {}))
        .catch((e) => flash(status, "error", "Bad " + name + " event: " + e.message));
    });
  }
  refreshEmpty();
  return () => es.close();
}
