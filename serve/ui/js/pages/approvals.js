// Approvals: commands waiting for a person (GET /v1/approvals) with the
// command, the reasons, the session and the choices once / session /
// always / deny (POST /v1/approvals/{id} {"choice"}), and clarifying
// questions (GET /v1/clarifications, POST /v1/clarifications/{id}
// {"answer"}). Polled every POLL_MS while shown. Route: #/approvals.

import { h, clear } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { sessionHash } from "../router.js";
import { pageHeader, statusLine, flash, empty, every, refreshButton } from "../widgets.js";

const POLL_MS = 2000;
const CHOICE_LABELS = {
  once: "Allow once", session: "Allow for this session", always: "Always allow", deny: "Deny",
};

export async function render(root) {
  const status = statusLine();
  const loadStatus = statusLine();
  const approvalsBox = h("div.cards", { "data-testid": "approvals", "aria-label": "Pending approvals" });
  const clarifyBox = h("div.cards", { "data-testid": "clarifications", "aria-label": "Questions waiting for an answer" });
  const badgeEl = document.getElementById("approvals-badge");
  const answered = new Set();   // ids answered from this page (hidden even if a poll raced)
  const drafts = new Map();     // clarification id -> typed answer, kept across polls

  async function load() {
    const [a, c] = await Promise.allSettled([api.get("/v1/approvals"), api.get("/v1/clarifications")]);
    renderApprovals(a);
    renderClarifications(c);
    const n = (a.status === "fulfilled" && Array.isArray(a.value.data) ? a.value.data.filter((x) => !answered.has(String(x.id))).length : 0)
      + (c.status === "fulfilled" && Array.isArray(c.value.data) ? c.value.data.filter((x) => !answered.has("c:" + x.id)).length : 0);
    if (badgeEl) { badgeEl.hidden = n === 0; badgeEl.textContent = String(n); }
    if (a.status === "rejected" && c.status === "rejected") throw a.reason;
  }

  function renderApprovals(res) {
    if (res.status === "rejected") {
      approvalsBox.dataset.ids = "";
      clear(approvalsBox);
      approvalsBox.appendChild(h("p.notice.error", "Approvals cannot be loaded: " + res.reason.message));
      return;
    }
    const items = (Array.isArray(res.value.data) ? res.value.data : []).filter((x) => !answered.has(String(x.id)));
    // Same set as shown: keep the cards (and the keyboard focus on them),
    // only move the expiry texts on.
    const ids = items.map((x) => String(x.id)).join("\n");
    if (approvalsBox.dataset.ids === ids && approvalsBox.childElementCount) {
      for (const a of items) {
        const el = approvalsBox.querySelector('[data-approval-id="' + CSS.escape(String(a.id)) + '"] .expires');
        if (el && a.expires_at_ms) el.textContent = "denied automatically " + fmt.relative(a.expires_at_ms);
      }
      return;
    }
    approvalsBox.dataset.ids = ids;
    clear(approvalsBox);
    if (!items.length) {
      approvalsBox.appendChild(empty(res.value.enabled === false
        ? "HTTP approvals are off on this node (approvals.http: off): a command that needs approval where nobody can be asked in a terminal is denied at once."
        : "No command is waiting for approval."));
      return;
    }
    for (const a of items) approvalsBox.appendChild(approvalCard(a));
  }

  function approvalCard(a) {
    const id = String(a.id);
    const choices = Array.isArray(a.choices) && a.choices.length ? a.choices.map(String) : ["once", "session", "always", "deny"];
    const reasons = Array.isArray(a.descriptions) ? a.descriptions : [];
    const buttons = choices.map((choice) => h("button.btn" + (choice === "deny" ? ".danger" : choice === "once" ? ".primary" : ""), {
      type: "button", "data-choice": choice, "data-testid": "approval-" + choice,
      onclick: () => answerApproval(id, choice, card, buttons),
    }, CHOICE_LABELS[choice] || choice));
    const card = h("article.card.approval", { "data-approval-id": id, "data-testid": "approval", "aria-label": "Approval " + id },
      h("div.card-head",
        h("span.small.muted", "Session "), a.session_id ? h("a.mono", { href: sessionHash(a.session_id) }, String(a.session_id)) : h("span.muted", "–"),
        h("span.small.muted.push.expires", a.expires_at_ms ? "denied automatically " + fmt.relative(a.expires_at_ms) : "")),
      h("div.block-label", "Command"),
      h("pre.text.command", { "data-testid": "approval-command" }, String(a.command ?? "")),
      reasons.length ? h("div.block-label", reasons.length === 1 ? "Reason" : "Reasons") : null,
      reasons.length ? h("ul.reasons", reasons.map((r) => h("li", String(r)))) : null,
      a.guardian_verdict ? h("p.small", h("strong", "Reviewer model: "), String(a.guardian_verdict)) : null,
      h("div.choices", { role: "group", "aria-label": "Answer" }, buttons),
      h("p.small.muted", "Waiting since " + fmt.datetime(a.created_at_ms)));
    return card;
  }

  async function answerApproval(id, choice, card, buttons) {
    for (const b of buttons) b.disabled = true;
    try {
      await api.post("/v1/approvals/" + api.seg(id), { choice });
      answered.add(id);
      card.remove();
      flash(status, "ok", (choice === "deny" ? "Denied" : "Approved (" + choice + ")") + ": approval " + id + ".");
      if (!approvalsBox.querySelector("[data-approval-id]")) approvalsBox.appendChild(empty("No command is waiting for approval."));
    } catch (e) {
      if (e.status === 409 || e.status === 404) {
        answered.add(id);
        card.remove();
        flash(status, "error", "Approval " + id + " was already answered or has ended (" + e.message + ").");
      } else {
        for (const b of buttons) b.disabled = false;
        flash(status, "error", "The answer was not taken: " + e.message);
      }
    }
  }

  function renderClarifications(res) {
    // A text box being typed in survives the poll: only rebuild when the set changed.
    if (res.status === "rejected") {
      clarifyBox.dataset.ids = "";
      clear(clarifyBox);
      clarifyBox.appendChild(h("p.notice.error", "Questions cannot be loaded: " + res.reason.message));
      return;
    }
    const items = (Array.isArray(res.value.data) ? res.value.data : []).filter((x) => !answered.has("c:" + x.id));
    const ids = items.map((x) => String(x.id)).join("\n");
    if (clarifyBox.dataset.ids === ids && clarifyBox.childElementCount) return;
    clarifyBox.dataset.ids = ids;
    clear(clarifyBox);
    if (!items.length) {
      clarifyBox.appendChild(empty(res.value.enabled === false
        ? "Questions over HTTP are off on this node (clarify.http: off)."
        : "No question is waiting for an answer."));
      return;
    }
    for (const q of items) clarifyBox.appendChild(clarifyCard(q));
  }

  function clarifyCard(q) {
    const id = String(q.id);
    const inputId = "clarify-" + id.replace(/[^A-Za-z0-9_-]/g, "_");
    const input = h("textarea#" + inputId, { rows: 2, name: "answer", required: true, "data-testid": "clarify-answer" });
    input.value = drafts.get(id) || "";
    input.addEventListener("input", () => drafts.set(id, input.value));
    const submit = h("button.btn.primary", { type: "submit" }, "Answer");
    const choices = Array.isArray(q.choices) ? q.choices.map(String) : [];
    const form = h("form.clarify-form",
      h("label", { for: inputId }, "Your answer"), input,
      choices.length ? h("div.choices", { role: "group", "aria-label": "Suggested answers" },
        choices.map((c) => h("button.btn.small", { type: "button", onclick: () => { input.value = c; drafts.set(id, c); input.focus(); } }, c))) : null,
      h("div.form-actions", submit));
    const card = h("article.card.clarification", { "data-clarification-id": id, "data-testid": "clarification" },
      h("div.card-head",
        h("span.small.muted", "Session "), q.session_id ? h("a.mono", { href: sessionHash(q.session_id) }, String(q.session_id)) : h("span.muted", "–"),
        h("span.small.muted.push", q.expires_at_ms ? "gives up " + fmt.relative(q.expires_at_ms) : "")),
      h("p.question", String(q.question ?? q.prompt ?? q.text ?? "")),
      form);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      try {
        await api.post("/v1/clarifications/" + api.seg(id), { answer: input.value });
        answered.add("c:" + id);
        drafts.delete(id);
        card.remove();
        flash(status, "ok", "Answered question " + id + ".");
        if (!clarifyBox.querySelector("[data-clarification-id]")) clarifyBox.appendChild(empty("No question is waiting for an answer."));
      } catch (e) {
        submit.disabled = false;
        if (e.status === 409 || e.status === 404) { answered.add("c:" + id); card.remove(); }
        flash(status, "error", "The answer was not taken: " + e.message);
      }
    });
    return card;
  }

  const stop = every(POLL_MS, load, loadStatus);
  root.appendChild(pageHeader("Approvals", refreshButton(() => load().catch((e) => flash(loadStatus, "error", e.message)))));
  root.appendChild(h("p.muted", "Commands that need a person's approval, from every channel that cannot ask in a terminal. "
    + "A command nobody answers in time is denied."));
  root.appendChild(status);
  root.appendChild(loadStatus);
  root.appendChild(h("h2", "Commands"));
  root.appendChild(approvalsBox);
  root.appendChild(h("h2", "Questions"));
  root.appendChild(clarifyBox);
  await stop.first;
  return stop;
}
