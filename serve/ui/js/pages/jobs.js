// Jobs: the scheduled jobs (docs/cron.md, GET /ui/api/jobs) with their
// schedule in words, next run and last status, each with Run now
// (POST .../run), Pause / Resume; and one job (#/jobs/ID, GET
// /ui/api/jobs/{id}) with its definition, the answers delivered to the
// dashboard, and its run history a page at a time (GET .../runs?limit&offset),
// each run linking to its session's transcript; Delete (DELETE) after a
// confirmation. Polled while shown. Routes: #/jobs, #/jobs/ID[?offset=N].

import { h, clear, confirmDialog } from "../dom.js";
import * as api from "../api.js";
import * as fmt from "../format.js";
import { hashFor, sessionHash } from "../router.js";
import { pageHeader, table, badge, statusLine, flash, empty, every, refreshButton, textBlock } from "../widgets.js";

const POLL_MS = 5000;
const RUNS_PAGE = 20;

// Run and job statuses (cron/job.hpp) -> badge colour.
function statusKind(s) {
  switch (String(s || "")) {
    case "ok": case "silent": return "good";
    case "running": case "unreachable": case "skipped": case "interrupted": return "warn";
    case "error": case "failed": case "delivery_failed": return "bad";
    default: return "";
  }
}

const jobHash = (id, query) => hashFor("jobs", id, query);

function stateBadge(j) {
  if (j.running_run_id) return badge("running", "warn");
  if (j.paused) return badge("paused", "warn");
  if (!j.enabled) return badge("done", "");
  return badge("scheduled", "good");
}

function when(ms) {
  if (!ms) return h("span.muted", "–");
  return h("span.nowrap", { title: fmt.datetime(ms) }, fmt.datetime(ms), h("span.muted.small", " (" + fmt.relative(ms) + ")"));
}

function scheduleCell(j) {
  return h("div",
    h("div", String(j.schedule_description || j.schedule || "")),
    h("div.mono.small.muted", String(j.schedule || "") + (j.timezone ? " · " + j.timezone : "")));
}

// The buttons of one job: Run now, Pause or Resume. `after` reloads.
function jobActions(j, status, after) {
  const id = String(j.id);
  const name = String(j.name || id);
  async function act(verb, button) {
    button.disabled = true;
    try {
      await api.post("/ui/api/jobs/" + api.seg(id) + "/" + verb);
      flash(status, "ok", verb === "run" ? "Started a run of " + name + "."
        : (verb === "pause" ? "Paused " : "Resumed ") + name + ".");
      await after();
    } catch (e) {
      flash(status, "error", (verb === "run" ? "Run now" : verb === "pause" ? "Pause" : "Resume")
        + " of " + name + " failed: " + e.message);
    } finally {
      button.disabled = false;
    }
  }
  const run = h("button.btn.small", { type: "button", "data-testid": "job-run", "aria-label": "Run " + name + " now" }, "Run now");
  run.addEventListener("click", () => act("run", run));
  const toggle = j.paused
    ? h("button.btn.small", { type: "button", "data-testid": "job-resume", "aria-label": "Resume " + name }, "Resume")
    : h("button.btn.small", { type: "button", "data-testid": "job-pause", "aria-label": "Pause " + name }, "Pause");
  toggle.addEventListener("click", () => act(j.paused ? "resume" : "pause", toggle));
  return h("div.row-actions", run, toggle);
}

export async function render(root, params, ctx) {
  if (params.id) return renderJob(root, params, ctx);
  const status = statusLine();
  const loadStatus = statusLine();
  const body = h("div", { "data-testid": "jobs" });

  let shown = "";
  async function load(force) {
    const res = await api.get("/ui/api/jobs");
    const rows = Array.isArray(res.data) ? res.data : [];
    // Unchanged data is not drawn again (buttons keep their focus); the
    // relative times are redrawn once a minute.
    const key = JSON.stringify(res) + Math.floor(Date.now() / 60000);
    if (key === shown && force !== true) return;
    shown = key;
    clear(body);
    if (Array.isArray(res.damaged) && res.damaged.length)
      body.appendChild(h("p.notice.error", { role: "alert" },
        "Some stored jobs cannot be read: " + res.damaged.map(String).join("; ")));
    if (!rows.length) {
      body.appendChild(empty("No job is scheduled. Create one with the cronjob tool in a conversation, "
        + "or with `mibyan cron add --schedule \"every 1h\" --prompt \"...\"` (docs/cron.md)."));
      return;
    }
    body.appendChild(table([
      { label: "Job", value: (j) => h("div",
          h("a", { href: jobHash(j.id), "data-testid": "job-link" }, String(j.name || j.id)),
          h("div.mono.small.muted", String(j.id))) },
      { label: "Schedule", value: scheduleCell },
      { label: "Next run", value: (j) => when(j.next_run_ms) },
      { label: "Last run", value: (j) => when(j.last_run_ms) },
      { label: "Last status", value: (j) => j.last_status
          ? badge(String(j.last_status), statusKind(j.last_status)) : h("span.muted", "–") },
      { label: "State", value: (j) => [stateBadge(j),
          j.paused && j.pause_reason ? h("div.small.muted", String(j.pause_reason)) : null] },
      { label: "Actions", cls: "actions", value: (j) => jobActions(j, status, () => load(true)) },
    ], rows, { caption: "Scheduled jobs", rowAttrs: (j) => ({ "data-job-id": String(j.id) }) }));
  }

  const stop = every(POLL_MS, load, loadStatus);
  root.appendChild(pageHeader("Jobs", refreshButton(() => load(true).catch((e) => flash(loadStatus, "error", e.message)))));
  root.appendChild(status);
  root.appendChild(loadStatus);
  root.appendChild(body);
  await stop.first;
  return stop;
}

function runsTable(runs) {
  return table([
    { label: "Started", value: (r) => r.started_ms ? h("span.nowrap", fmt.datetime(r.started_ms)) : h("span.muted", "–") },
    { label: "Trigger", value: (r) => h("span.small", String(r.trigger || "–") + (r.attempt ? " #" + r.attempt : "")) },
    { label: "Status", value: (r) => badge(String(r.status || "–"), statusKind(r.status)) },
    { label: "Took", cls: "num", value: (r) => r.ended_ms && r.started_ms
        ? fmt.duration(Math.round((r.ended_ms - r.started_ms) / 1000)) : "–" },
    { label: "Session", value: (r) => r.session_id
        ? h("a.mono.small", { href: sessionHash(r.session_id), "data-testid": "run-session" }, String(r.session_id))
        : h("span.muted", "–") },
    { label: "Result", value: (r) => r.error
        ? h("span.error-text", String(r.error))
        : (r.result ? textBlock(String(r.result)) : h("span.muted", "–")) },
  ], runs, { caption: "Runs", rowAttrs: (r) => ({ "data-run-id": String(r.id), "data-status": String(r.status || "") }) });
}

async function renderJob(root, params, ctx) {
  const id = String(params.id);
  const offset = Math.max(0, parseInt(params.offset || "0", 10) || 0);
  const status = statusLine();
  const loadStatus = statusLine();
  const head = h("div");
  const meta = h("div", { "data-testid": "job-detail" });
  const delivered = h("div", { "data-testid": "job-delivered" });
  const history = h("div", { "data-testid": "job-runs" });

  async function remove(name, button) {
    const ok = await confirmDialog("Delete job?",
      "The job " + name + " (" + id + ") and its run history are deleted. The sessions of its runs stay.", "Delete");
    if (!ok) return;
    button.disabled = true;
    try {
      await api.del("/ui/api/jobs/" + api.seg(id));
      ctx.navigate(jobHash());
    } catch (e) {
      flash(status, "error", "Delete failed: " + e.message);
      button.disabled = false;
    }
  }

  let shown = "";
  async function load(force) {
    const [res, runs] = await Promise.all([
      api.get("/ui/api/jobs/" + api.seg(id)),
      api.get("/ui/api/jobs/" + api.seg(id) + "/runs", { limit: RUNS_PAGE, offset }),
    ]);
    const key = JSON.stringify([res, runs]) + Math.floor(Date.now() / 60000);
    if (key === shown && force !== true) return;
    shown = key;
    const j = res.job || {};
    const name = String(j.name || id);
    clear(head);
    const del = h("button.btn.small.danger", { type: "button", "data-testid": "job-delete" }, "Delete");
    del.addEventListener("click", () => remove(name, del));
    head.appendChild(pageHeader(name, jobActions(j, status, () => load(true)), del));

    clear(meta);
    const dl = h("dl.meta");
    const row = (k, v) => { dl.appendChild(h("dt", k)); dl.appendChild(h("dd", v)); };
    row("Id", h("span.mono", String(j.id || id)));
    row("State", [stateBadge(j), j.pause_reason ? " " + String(j.pause_reason) : ""]);
    row("Schedule", scheduleCell(j));
    row("Next run", when(j.next_run_ms));
    row("Last run", when(j.last_run_ms));
    row("Last status", j.last_status ? badge(String(j.last_status), statusKind(j.last_status)) : "–");
    row("Failures in a row", fmt.int(j.consecutive_failures));
    row("Runs", fmt.int(j.run_count));
    row("Deliver", (Array.isArray(j.deliver) ? j.deliver : []).map(String).join(", ") || "–");
    row("Created by", String(j.created_by || "–")
      + (j.created_by_session ? " in " : ""), j.created_by_session
      ? h("a.mono.small", { href: sessionHash(j.created_by_session) }, String(j.created_by_session)) : null);
    if (j.cwd) row("Working directory", h("span.mono", String(j.cwd)));
    if (Array.isArray(j.toolsets) && j.toolsets.length) row("Toolsets", j.toolsets.map(String).join(", "));
    if (Array.isArray(j.skills) && j.skills.length) row("Skills", j.skills.map(String).join(", "));
    if (j.model || j.provider) row("Model", [j.provider, j.model].filter(Boolean).map(String).join(" / "));
    meta.appendChild(dl);
    meta.appendChild(j.script ? textBlock(String(j.script), "Script", "code") : textBlock(String(j.prompt || ""), "Prompt"));

    clear(delivered);
    const answers = Array.isArray(res.delivered) ? res.delivered : [];
    if ((Array.isArray(j.deliver) ? j.deliver : []).includes("dashboard")) {
      delivered.appendChild(h("h2", "Delivered to the dashboard"));
      if (!answers.length) delivered.appendChild(empty("No answer delivered yet."));
      else delivered.appendChild(h("ol.messages", answers.map((r) => h("li.msg.role-assistant", { "data-run-id": String(r.id) },
        h("div.msg-head", badge(String(r.status || ""), statusKind(r.status)),
          r.session_id ? h("a.mono.small", { href: sessionHash(r.session_id) }, "transcript") : null,
          h("span.msg-time.muted.small", fmt.datetime(r.ended_ms || r.started_ms))),
        h("div.content", String(r.result || ""))))));
    }

    clear(history);
    history.appendChild(h("h2", "History"));
    const rows = Array.isArray(runs.data) ? runs.data : [];
    if (!rows.length) history.appendChild(empty(offset ? "No older runs." : "The job has not run yet."));
    else history.appendChild(runsTable(rows));
    const pager = h("div.pager",
      offset > 0 ? h("a.btn.small", { href: jobHash(id, { offset: Math.max(0, offset - RUNS_PAGE) }) }, "Newer") : h("span"),
      runs.next_offset !== null && runs.next_offset !== undefined
        ? h("a.btn.small", { href: jobHash(id, { offset: runs.next_offset }) }, "Older") : h("span"));
    history.appendChild(pager);
  }

  root.appendChild(h("p.breadcrumb", h("a", { href: jobHash() }, "Jobs"), " / ", h("span.mono", id)));
  root.appendChild(head);
  root.appendChild(status);
  root.appendChild(loadStatus);
  root.appendChild(meta);
  root.appendChild(delivered);
  root.appendChild(history);
  const stop = every(POLL_MS, load, loadStatus);
  await stop.first;
  if (!head.firstChild) head.appendChild(pageHeader("Job " + id));
  return stop;
}
