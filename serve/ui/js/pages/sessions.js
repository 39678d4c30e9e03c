// Sessions: the stored sessions, newest first, PAGE_SIZE a page
// (GET /ui/api/sessions?limit&offset&source), a full-text search whose hits
// are highlighted from the server's offsets (GET /ui/api/search), and
// per-session export (JSONL download) and delete (after a confirmation).
// Route: #/sessions[?offset=N&source=S&q=TEXT].

import { h, highlighted, snippet, confirmDialog } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { hashFor, sessionHash } from "../router.js";
import { pageHeader, table, badge, statusLine, flash, empty } from "../widgets.js";

const PAGE_SIZE = 25;

export async function render(root, params, ctx) {
  const offset = Math.max(0, parseInt(params.offset || "0", 10) || 0);
  const source = params.source || "";
  const q = params.q || "";
  const status = statusLine();

  const searchInput = h("input#search-q", {
    type: "search", name: "q", value: q, placeholder: "Search messages", "aria-label": "Search messages",
    autocomplete: "off",
  });
  const searchForm = h("form.search", { role: "search", "data-testid": "search-form" },
    searchInput, h("button.btn.primary", { type: "submit" }, "Search"),
    q ? h("a.btn", { href: hashFor("sessions", null, { source }) }, "Clear") : null);
  searchForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.navigate(hashFor("sessions", null, { q: searchInput.value.trim(), source }));
  });

  const sourceInput = h("input#source-filter", {
    type: "text", name: "source", value: source, placeholder: "any", size: 10,
    "aria-label": "Filter by source",
  });
  const filterForm = h("form.filter", h("label", { for: "source-filter" }, "Source "), sourceInput,
    h("button.btn.small", { type: "submit" }, "Filter"));
  filterForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.navigate(hashFor("sessions", null, { source: sourceInput.value.trim() }));
  });

  root.appendChild(pageHeader("Sessions", searchForm));
  root.appendChild(status);

  if (q) {
    await renderSearch(root, q);
    return;
  }

  root.appendChild(h("div.toolbar", filterForm));
  const body = h("div");
  root.appendChild(body);
  const res = await api.get("/ui/api/sessions", { limit: PAGE_SIZE, offset, source });
  const rows = Array.isArray(res.data) ? res.data : [];
  if (!rows.length) {
    body.appendChild(empty(offset ? "No more sessions." : "No sessions stored yet."));
  } else {
    body.appendChild(sessionTable(rows, status, ctx));
  }
  const pager = h("nav.pager", { "aria-label": "Session pages" },
    offset > 0 ? h("a.btn", { href: hashFor("sessions", null, { offset: Math.max(0, offset - PAGE_SIZE) || "", source }), rel: "prev" }, "← Newer") : null,
    h("span.muted", rows.length ? "Sessions " + (offset + 1) + "–" + (offset + rows.length) : ""),
    res.next_offset !== null && res.next_offset !== undefined
      ? h("a.btn", { href: hashFor("sessions", null, { offset: res.next_offset, source }), rel: "next", "data-testid": "next-page" }, "Older →")
      : null);
  body.appendChild(pager);
}

function tokensOf(s) {
  const t = s.tokens || {};
  return { input: Number(t.input) || 0, output: Number(t.output) || 0,
           cache: (Number(t.cache_read) || 0) + (Number(t.cache_write) || 0), reasoning: Number(t.reasoning) || 0 };
}

function sessionTable(rows, status, ctx) {
  return table([
    { label: "Started", cls: "nowrap", value: (s) => h("time", { datetime: new Date(Number(s.started_at_ms) || 0).toISOString() }, fmt.datetime(s.started_at_ms)) },
    { label: "Session", value: (s) => h("div.session-cell",
        h("a", { href: sessionHash(s.id), "data-testid": "session-link" }, s.title ? String(s.title) : String(s.id)),
        s.title ? h("div.muted.mono.small", String(s.id)) : null,
        s.parent_session_id ? h("div.small.muted", "child of ", h("a.mono", { href: sessionHash(s.parent_session_id) }, String(s.parent_session_id))) : null) },
    { label: "Source", value: (s) => badge(String(s.source || "–")) },
    { label: "Model", value: (s) => h("span.mono.small", String(s.model || "–")) },
    { label: "Messages", cls: "num", value: (s) => fmt.int(s.message_count) },
    { label: "Tool calls", cls: "num", value: (s) => fmt.int(s.tool_call_count) },
    { label: "Tokens in / out", cls: "num", value: (s) => {
        const t = tokensOf(s);
        return h("span", { title: "input " + fmt.int(t.input) + ", output " + fmt.int(t.output) + ", cache " + fmt.int(t.cache) + ", reasoning " + fmt.int(t.reasoning) },
          fmt.compact(t.input) + " / " + fmt.compact(t.output));
      } },
    { label: "Cost", cls: "num", value: (s) => fmt.usd(s.cost_usd) },
    { label: "Actions", cls: "actions", value: (s) => h("div.row-actions",
        h("a.btn.small", { href: "/ui/api/sessions/" + api.seg(s.id) + "/export", download: String(s.id) + ".jsonl",
                           "aria-label": "Export " + s.id + " as JSONL" }, "Export"),
        h("button.btn.small.danger", { type: "button", "aria-label": "Delete " + s.id, "data-testid": "delete-session",
          onclick: async () => {
            if (await deleteSession(s.id, status)) ctx.navigate(location.hash);
          } }, "Delete")) },
  ], rows, { caption: "Stored sessions, newest first", cls: "sessions", rowAttrs: (s) => ({ "data-session-id": String(s.id) }) });
}

// Asks, then deletes; true when the session is gone.
export async function deleteSession(id, status) {
  const ok = await confirmDialog("Delete session?",
    "Session " + id + " and its messages will be deleted from the store. This cannot be undone.", "Delete");
  if (!ok) return false;
  try {
    await api.del("/ui/api/sessions/" + api.seg(id));
    flash(status, "ok", "Deleted " + id + ".");
    return true;
  } catch (e) {
    flash(status, "error", e.status === 409
      ? "Session " + id + " is running a turn; it can be deleted when the turn ends."
      : "Delete failed: " + e.message);
    return false;
  }
}

async function renderSearch(root, q) {
  const res = await api.get("/ui/api/search", { q, limit: 50 });
  const hits = Array.isArray(res.data) ? res.data : [];
  const list = h("ol.hits", { "data-testid": "search-results", "aria-label": "Search results" });
  root.appendChild(h("p.muted", { role: "status" },
    hits.length ? hits.length + (hits.length === 1 ? " message matches " : " messages match ") : "No message matches ",
    h("q", q), "."));
  for (const hit of hits) {
    const sn = snippet(hit.text, hit.highlights);
    list.appendChild(h("li.hit",
      h("div.hit-head",
        h("a.mono", { href: sessionHash(hit.session_id, { m: hit.message_id }) }, String(hit.session_id)),
        " ", badge(String(hit.role || "")),
      ),
      h("p.hit-text", highlighted(sn.text, sn.ranges))));
  }
  root.appendChild(list);
}
