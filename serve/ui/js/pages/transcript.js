// Transcript: one session (GET /ui/api/sessions/{id}) with its messages,
// the reasoning, each tool call with its arguments and its result (long
// ones collapsed), execute_code scripts highlighted as Python together with
// the tools the script calls, and links along the compression chain, to the
// parent and to subagent children. Export and delete. Route:
// #/session/ID[?m=MESSAGE_ID] (m: scroll to and mark that message).

import { h, confirmDialog } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { highlight, scriptToolCalls } from "../pyhighlight.js";
import { sessionHash } from "../router.js";
import { badge, stateKind, textBlock, statusLine, flash, isLong } from "../widgets.js";

export async function render(root, params, ctx) {
  const id = params.id || "";
  if (!id) { ctx.navigate("#/sessions"); return; }
  const status = statusLine();
  let s;
  try {
    s = await api.get("/ui/api/sessions/" + api.seg(id));
  } catch (e) {
    root.appendChild(h("div.page-header", h("h1", "Session ", h("span.mono", id))));
    root.appendChild(h("p.notice.error", { role: "alert" },
      e.status === 404 ? "No session " + id + " is stored." : e.message));
    root.appendChild(h("p", h("a", { href: "#/sessions" }, "← All sessions")));
    return;
  }
  const messages = Array.isArray(s.messages) ? s.messages : [];

  root.appendChild(h("p.breadcrumb", h("a", { href: "#/sessions" }, "Sessions"), " / ", h("span.mono", id)));
  root.appendChild(h("div.page-header",
    h("h1", s.title ? String(s.title) : h("span.mono", "Session " + id)),
    h("div.page-actions",
      h("a.btn", { href: "/ui/api/sessions/" + api.seg(id) + "/export", download: id + ".jsonl" }, "Export JSONL"),
      h("button.btn.danger", { type: "button", onclick: async () => {
        const ok = await confirmDialog("Delete session?",
          "Session " + id + " and its " + messages.length + " messages will be deleted. This cannot be undone.", "Delete");
        if (!ok) return;
        try {
          await api.del("/ui/api/sessions/" + api.seg(id));
          ctx.navigate("#/sessions");
        } catch (e) {
          flash(status, "error", e.status === 409 ? "A turn of this session is running; delete it when the turn ends." : "Delete failed: " + e.message);
        }
      } }, "Delete"))));
  root.appendChild(status);
  root.appendChild(metaBlock(s));
  root.appendChild(linksBlock(s));

  const byCall = new Map();
  for (const m of messages)
    if (m && m.role === "tool" && m.tool_call_id && !byCall.has(String(m.tool_call_id))) byCall.set(String(m.tool_call_id), m);
  const shown = new Set();
  const list = h("ol.messages", { "aria-label": "Messages", "data-testid": "messages" });
  messages.forEach((m, i) => {
    if (!m || typeof m !== "object") return;
    if (m.role === "tool" && m.tool_call_id && shown.has(String(m.tool_call_id))) return;
    list.appendChild(messageItem(m, i, byCall, shown));
  });
  if (!messages.length) list.appendChild(h("li.empty", "This session has no messages."));
  root.appendChild(list);

  if (params.m) {
    const target = list.querySelector('[data-message-id="' + CSS.escape(String(params.m)) + '"]');
    if (target) {
      target.classList.add("target");
      for (const d of target.querySelectorAll("details")) d.open = true;
      requestAnimationFrame(() => target.scrollIntoView({ block: "center" }));
    }
  }
}

function metaBlock(s) {
  const t = s.tokens || {};
  const items = [
    ["Session id", h("span.mono", String(s.id ?? ""))],
    ["Source", String(s.source || "–")],
    ["Model", h("span.mono", String(s.model || "–") + (s.provider ? " (" + s.provider + ")" : ""))],
    ["Started", fmt.datetime(s.started_at_ms)],
    ["Ended", s.ended_at_ms ? fmt.datetime(s.ended_at_ms) + (s.end_reason ? " — " + s.end_reason : "") : "running or open"],
    ["Messages", fmt.int(s.message_count ?? (s.messages || []).length)],
    ["Tool calls", fmt.int(s.tool_call_count)],
    ["API calls", fmt.int(s.api_call_count)],
    ["Tokens", "in " + fmt.int(t.input) + " · out " + fmt.int(t.output) + " · cache read " + fmt.int(t.cache_read)
      + " · cache write " + fmt.int(t.cache_write) + " · reasoning " + fmt.int(t.reasoning)],
    ["Cost", fmt.usd(s.cost_usd)],
  ];
  return h("dl.meta", items.map(([k, v]) => [h("dt", k), h("dd", v)]));
}

function linksBlock(s) {
  const chain = s.chain || {};
  const children = Array.isArray(s.children) ? s.children : [];
  const parts = [];
  if (s.parent_session_id)
    parts.push(h("li", "Subagent of ", h("a.mono", { href: sessionHash(s.parent_session_id) }, String(s.parent_session_id))));
  if (chain.previous)
    parts.push(h("li", "Continues (after compression) ", h("a.mono", { href: sessionHash(chain.previous), rel: "prev", "data-testid": "chain-previous" }, String(chain.previous))));
  if (chain.next)
    parts.push(h("li", "Continued (after compression) in ", h("a.mono", { href: sessionHash(chain.next), rel: "next", "data-testid": "chain-next" }, String(chain.next))));
  if (children.length)
    parts.push(h("li", "Subagents: ", children.map((c, i) => [i ? ", " : "", h("a.mono", { href: sessionHash(c), "data-testid": "child-link" }, String(c))])));
  if (!parts.length) return document.createDocumentFragment();
  return h("nav.session-links", { "aria-label": "Related sessions" }, h("ul", parts));
}

function roleLabel(role) {
  return { user: "User", assistant: "Assistant", system: "System", tool: "Tool result" }[role] || String(role || "message");
}

function messageItem(m, index, byCall, shown) {
  const role = String(m.role || "");
  const text = fmt.contentText(m.content);
  const item = h("li.msg.role-" + role.replace(/[^a-z_-]/gi, ""), {
    "data-message-id": m.id !== undefined && m.id !== null ? String(m.id) : "",
    "data-testid": "message",
  });
  item.appendChild(h("div.msg-head",
    h("span.role", roleLabel(role)),
    m.name ? h("span.mono.small", String(m.name)) : null,
    m.tool_call_id ? h("span.mono.small.muted", "call " + String(m.tool_call_id)) : null,
    h("span.muted.small.msg-time", m.ts_ms ? fmt.datetime(m.ts_ms) : "#" + (index + 1))));
  if (m.reasoning) {
    item.appendChild(h("details.reasoning", h("summary", "Reasoning"),
      h("pre.text", String(m.reasoning))));
  }
  if (text) {
    item.appendChild(role === "tool" ? textBlock(text) : (isLong(text) ? textBlock(text) : h("div.content", text)));
  }
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
  for (const c of calls) {
    const result = c && c.id !== undefined ? byCall.get(String(c.id)) : undefined;
    if (result) shown.add(String(c.id));
    item.appendChild(toolCall(c || {}, result));
  }
  return item;
}

function parseArgs(args) {
  if (args && typeof args === "object") return args;
  if (typeof args !== "string") return null;
  try {
    const v = JSON.parse(args);
    return v && typeof v === "object" ? v : null;
  } catch (e) { return null; }
}

function toolCall(c, result) {
  const name = String(c.name || "tool");
  const args = parseArgs(c.arguments);
  const box = h("div.tool-call", { "data-tool": name, "data-testid": "tool-call" },
    h("div.tool-head", h("span.tool-name", name), c.id ? h("span.mono.small.muted", String(c.id)) : null));
  if (name === "execute_code" && args && typeof args.code === "string") {
    box.appendChild(scriptBlock(args.code));
    const rest = { ...args };
    delete rest.code;
    if (Object.keys(rest).length) box.appendChild(textBlock(JSON.stringify(rest, null, 2), "Other arguments", "json"));
  } else {
    const argText = typeof c.arguments === "string" ? fmt.prettyJson(c.arguments) : JSON.stringify(c.arguments ?? {}, null, 2);
    box.appendChild(textBlock(argText, "Arguments", "json"));
  }
  if (result) box.appendChild(resultBlock(name, fmt.contentText(result.content)));
  else box.appendChild(h("p.muted.small", "No result stored for this call."));
  return box;
}

function scriptBlock(code) {
  const calls = scriptToolCalls(code);
  const lines = code.split("\n").length;
  const pre = h("pre.code.python", { "data-testid": "script" }, h("code", highlight(code)));
  const parts = [h("div.block-label", "Script (Python, " + lines + (lines === 1 ? " line)" : " lines)"))];
  parts.push(isLong(code)
    ? h("details.long", h("summary", h("span.muted", "Show the script")), pre)
    : pre);
  if (calls.length) {
    parts.push(h("div.script-calls", { "data-testid": "script-calls" },
      h("span.block-label", "Tools the script calls: "),
      h("ul.inline", calls.map((c) => h("li", h("span.tool-name", c.name), h("span.muted.small", " line " + c.line))))));
  }
  return h("div.block.script", parts);
}

function resultBlock(name, text) {
  const parsed = parseArgs(text);
  if (name === "execute_code" && parsed && typeof parsed.status === "string") {
    const facts = [badge(parsed.status, stateKind(parsed.status))];
    if (parsed.exit_code !== undefined) facts.push(h("span.small", "exit " + parsed.exit_code));
    if (parsed.tool_calls_made !== undefined)
      facts.push(h("span.small", { "data-testid": "script-tool-calls-made" }, parsed.tool_calls_made + " tool call" + (parsed.tool_calls_made === 1 ? "" : "s") + " made"));
    if (parsed.duration_seconds !== undefined) facts.push(h("span.small", parsed.duration_seconds + " s"));
    if (parsed.kernel && parsed.kernel.mode) facts.push(h("span.small.muted", "kernel " + parsed.kernel.mode));
    const out = [h("div.result-facts", facts)];
    const scriptCalls = Array.isArray(parsed.tool_calls) ? parsed.tool_calls : null;
    if (scriptCalls && scriptCalls.length) {
      out.push(h("ol.script-call-results", scriptCalls.map((sc) => h("li",
        h("span.tool-name", String(sc.name || "")),
        sc.arguments !== undefined ? textBlock(fmt.prettyJson(sc.arguments), "Arguments", "json") : null,
        sc.result !== undefined ? textBlock(fmt.contentText(sc.result), "Result") : null))));
    }
    if (parsed.output) out.push(textBlock(String(parsed.output), "Output"));
    if (parsed.error) out.push(textBlock(String(parsed.error), "Error", "error-text"));
    for (const k of ["warning", "hint", "note"])
      if (parsed[k]) out.push(h("p.small", h("strong", k + ": "), String(parsed[k])));
    out.push(h("details.raw", h("summary.small.muted", "Raw result"), h("pre.text.json", fmt.prettyJson(text))));
    return h("div.block.result", h("div.block-label", "Result"), out);
  }
  return h("div.block.result", textBlock(parsed ? JSON.stringify(parsed, null, 2) : text, "Result"));
}
