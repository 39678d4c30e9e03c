// Drives the dashboard (/ui/) of a real `mibyan serve` in headless Chromium
// with puppeteer-core (pinned in package.json; it downloads no browser).
// Run by tests/dashboard_browser_test.cpp as
//   node dashboard_browser.mjs
// with, in the environment:
//   SERVE_URL       http://127.0.0.1:PORT of a serve started with a key,
//                   `approvals.http: pending` and the scripted provider
//   SERVE_KEY       that key (MIBYAN_SERVER_KEY)
//   PROVIDER_URL    the scripted provider (tests/support/http_server.py)
//   WORK_DIR        a scratch directory the turns' commands may touch
//   CHROMIUM        the browser (default /usr/bin/chromium)
//   REPORT_PATH     where the JSON report goes
//   SCREENSHOT_DIR  optional: one 1280x800 PNG per page goes there
//   FAILURE_DIR     optional: a PNG of the page when a step fails
// Every step runs even when an earlier one failed (each records its own
// result); the report is {"ok", "steps":[{name, ok, error?, ms}],
// "pages":[...], "screenshots":[...]}. Exit status 0 only when every step passed.
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { check, control, providerRequests, reply as providerReply, script,
         streamed as providerStreamed } from "./scripted_provider.mjs";
import { checkNoPageErrors, openRoute, runAndReport, runStep, watchPage } from "./browser_steps.mjs";

const SERVE = process.env.SERVE_URL;
const KEY = process.env.SERVE_KEY || "";
const PROVIDER = process.env.PROVIDER_URL;
const WORK = process.env.WORK_DIR;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const REPORT = process.env.REPORT_PATH;
const SHOTS = process.env.SCREENSHOT_DIR || "";
const FAILURES = process.env.FAILURE_DIR || "";
const UI = SERVE + "/ui/";

const report = { ok: false, steps: [], pages: [], screenshots: [], console_errors: [], csp_violations: [] };

async function waitFor(fn, what, ms = 30000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what + (last instanceof Error ? " (" + last.message + ")" : ""));
}

// -- the scripted provider ---------------------------------------------------

// Replies as an OpenRouter-style gateway reports them, with `cost`: the
// session's cost_usd.
function reply(content, calls = [], usage = [120, 30]) {
  return providerReply(content, calls, usage,
                       { cost: (usage[0] * 2.5 + usage[1] * 10) / 1e6 });
}

const streamed = (pieces) => providerStreamed(pieces, [90, 12]);

// -- the node's API (bearer key, as a program would) -------------------------

async function chat(session, content, { stream = false } = {}) {
  const r = await fetch(SERVE + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + KEY, "X-Mibyan-Session": session },
    body: JSON.stringify({ model: "m", stream, messages: [{ role: "user", content }] }),
  });
  const text = await r.text();
  return { status: r.status, text, json: stream ? null : (() => { try { return JSON.parse(text); } catch (e) { return null; } })() };
}

async function apiGet(p) {
  const r = await fetch(SERVE + p, { headers: { Authorization: "Bearer " + KEY } });
  return { status: r.status, body: await r.json().catch(() => null) };
}

// The tool message the provider got for `callId` in any request so far.
async function toolResultSeen(callId) {
  for (const req of await providerRequests())
    for (const m of req.messages || [])
      if (m.role === "tool" && m.tool_call_id === callId) return String(m.content);
  return null;
}

// -- the browser -------------------------------------------------------------

let browser, page;

async function open(route, testid) {
  const pageName = testid || route.replace(/^#\//, "").split(/[/?]/)[0];
  await openRoute(page, route, pageName);
  if (!report.pages.includes(pageName)) report.pages.push(pageName);
}

async function shot(name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, "dashboard-" + name + ".png");
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.screenshot({ path: file, type: "png" });
  report.screenshots.push(file);
}

const text = (sel) => page.$eval(sel, (e) => e.textContent);
const count = (sel) => page.$$eval(sel, (els) => els.length);

async function clickText(selector, label) {
  const handles = await page.$$(selector);
  for (const h of handles) {
    const t = await h.evaluate((e) => e.textContent.trim());
    if (t === label) { await h.click(); return; }
  }
  throw new Error("no " + selector + " labelled " + JSON.stringify(label));
}

// Confirms the page's <dialog> (dom.js confirmDialog).
async function confirmDialog() {
  await page.waitForSelector("dialog[open] button[value=ok]", { timeout: 10000 });
  await page.click("dialog[open] button[value=ok]");
}

// -- steps -------------------------------------------------------------------

// A failed step saves a PNG of the page in FAILURE_DIR (when set).
async function failureShot(name) {
  if (!FAILURES || !page) return;
  try {
    fs.mkdirSync(FAILURES, { recursive: true });
    await page.screenshot({ path: path.join(FAILURES, "failed-" + name.replace(/\W+/g, "-") + ".png") });
  } catch (x) { /* best effort */ }
}

const step = (name, fn) => runStep(report, name, fn, failureShot);

const XSS_USER = 'Show me <script>window.__mibyanXss = "user"</script><img src="x" onerror="window.__mibyanXss = \'img\'"> please';
const XSS_FILE_TEXT = '<script>window.__mibyanXss = "tool"</script>\n<b>not bold</b>\n';
const XSS_ANSWER = 'Here it is: <script>window.__mibyanXss = "answer"</script> <iframe src="javascript:window.__mibyanXss=\'iframe\'"></iframe>';
const SCRIPT = [
  "from mibyan_tools import read_file, terminal",
  "",
  "# How often do the notes mention the island?",
  "def mentions(path, word='zanzibar'):",
  "    notes = str(read_file(path))",
  "    return notes.count(word)",
  "",
  "n = mentions(\"" + (WORK || "") + "/notes.txt\")",
  "listing = terminal(command=\"ls " + (WORK || "") + "\")",
  "print(f\"mentions={n} total={6 * 7}\")",
].join("\n");

async function main() {
  check(SERVE && PROVIDER && WORK && REPORT, "SERVE_URL, PROVIDER_URL, WORK_DIR and REPORT_PATH are set");
  fs.writeFileSync(path.join(WORK, "notes.txt"), "first zanzibar line\nsecond\nthird\n");
  fs.writeFileSync(path.join(WORK, "xss.txt"), XSS_FILE_TEXT);

  await step("seed sessions through the chat API", async () => {
    await control("/__reset", {});
    // A transcript with an execute_code call whose script calls two tools.
    await script({ body: reply("", [["call_exec", "execute_code", { code: SCRIPT }]]) });
    await script({ body: reply("The notes have three lines; one mentions zanzibar.", [], [300, 40]) });
    let r = await chat("dash-exec", "Count the lines of my notes with a script.");
    check(r.status === 200, "dash-exec turn: " + r.status + " " + r.text);
    const exec = await toolResultSeen("call_exec");
    check(exec && exec.includes("mentions=1"), "execute_code ran: " + exec);
    // A transcript full of markup: the user's text, a tool result, the answer.
    await script({ body: reply("", [["call_xss", "read_file", { path: path.join(WORK, "xss.txt") }]]) });
    await script({ body: reply(XSS_ANSWER) });
    r = await chat("dash-xss", XSS_USER);
    check(r.status === 200, "dash-xss turn: " + r.status + " " + r.text);
    // One to delete from the page.
    await script({ body: reply("Nothing to keep here.") });
    r = await chat("dash-delete-me", "A throwaway question.");
    check(r.status === 200, "dash-delete-me turn: " + r.status);
  });

  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // --no-sandbox: the test runs as root in a container, where Chromium's
    // own sandbox cannot start. Only this test passes it; the dashboard
    // itself relies on the CSP and text-only rendering, not on the flag.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
           "--force-color-profile=srgb", "--lang=en-US"],
    defaultViewport: { width: 1280, height: 800 },
  });
  page = await browser.newPage();
  page.setDefaultTimeout(30000);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  await watchPage(page, report);

  await step("login page, then the key logs in", async () => {
    const res = await page.goto(UI, { waitUntil: "load" });
    check(res.status() === 200, "GET /ui/ " + res.status());
    const csp = res.headers()["content-security-policy"] || "";
    check(csp.includes("script-src 'self'") && !csp.includes("unsafe-inline"), "CSP header: " + csp);
    await page.waitForSelector("[data-testid=login-form]");
    report.pages.push("login");
    await shot("login");
    // A wrong key first: refused, still on the login page.
    await page.type("#login-key", KEY + "-wrong");
    await page.click("[data-testid=login-form] button[type=submit]");
    await page.waitForSelector("[data-testid=login-form] .notice.error");
    await page.$eval("#login-key", (e) => { e.value = ""; });
    await page.type("#login-key", KEY);
    await page.click("[data-testid=login-form] button[type=submit]");
    await page.waitForFunction(() => document.getElementById("main").dataset.ready === "sessions");
    const cookies = await page.cookies();
    const c = cookies.find((x) => x.name === "mibyan_ui");
    check(c && c.httpOnly && c.sameSite === "Strict", "session cookie HttpOnly, SameSite=Strict: " + JSON.stringify(c));
    check(!(await page.evaluate(() => document.cookie)).includes("mibyan_ui"), "the cookie is not readable by scripts");
  });

  await step("sessions list: newest first, counts and tokens", async () => {
    await open("#/sessions");
    const ids = await page.$$eval("tr[data-session-id]", (rows) => rows.map((r) => r.dataset.sessionId));
    for (const id of ["dash-exec", "dash-xss", "dash-delete-me"]) check(ids.includes(id), id + " listed in " + ids);
    check(ids.indexOf("dash-delete-me") < ids.indexOf("dash-exec"), "newest first: " + ids);
    // dash-exec: 4 messages, 1 tool call, 420 input and 70 output tokens, a cost.
    const cells = await page.$$eval('tr[data-session-id="dash-exec"] td', (tds) => tds.map((t) => t.textContent.trim()));
    check(cells[4] === "4" && cells[5] === "1", "message and tool-call counts: " + cells);
    check(cells[6] === "420 / 70", "tokens: " + cells[6]);
    check(/^\$0\.00\d+$/.test(cells[7]), "cost: " + cells[7]);
    await shot("sessions");
  });

  await step("search highlights the hits", async () => {
    await open("#/sessions");
    await page.type("#search-q", "zanzibar");
    await Promise.all([
      page.waitForFunction(() => location.hash.includes("q=zanzibar") && document.getElementById("main").dataset.ready === "sessions"),
      page.click("[data-testid=search-form] button[type=submit]"),
    ]);
    await page.waitForSelector("[data-testid=search-results] li");
    const marks = await page.$$eval("[data-testid=search-results] mark", (ms) => ms.map((m) => m.textContent.toLowerCase()));
    check(marks.length > 0 && marks.every((m) => m.includes("zanzibar")), "highlights: " + JSON.stringify(marks));
    const links = await page.$$eval("[data-testid=search-results] a", (as) => as.map((a) => a.textContent));
    check(links.includes("dash-exec"), "a hit in dash-exec: " + links);
    await shot("search");
  });

  await step("transcript with an execute_code script, highlighted, and its tool calls", async () => {
    await open("#/session/dash-exec", "session");
    const script = await page.waitForSelector('[data-tool="execute_code"] pre.code.python');
    const kw = await script.$$eval(".tok-keyword", (els) => els.map((e) => e.textContent));
    check(kw.includes("from") && kw.includes("import") && kw.includes("def") && kw.includes("return"), "keywords " + kw);
    check((await script.$$eval(".tok-comment", (els) => els.length)) === 1, "one comment token");
    check((await script.$$eval(".tok-string", (els) => els.length)) >= 3, "string tokens");
    const code = await script.evaluate((e) => e.textContent);
    check(code === SCRIPT, "the script text is exact");
    const calls = await page.$$eval('[data-testid=script-calls] .tool-name', (els) => els.map((e) => e.textContent));
    check(calls.join(",") === "read_file,terminal", "script tool calls: " + calls);
    const made = await text("[data-testid=script-tool-calls-made]");
    check(made.startsWith("2 tool calls"), "tool_calls_made: " + made);
    const out = await page.$eval('[data-tool="execute_code"] .result', (e) => e.textContent);
    check(out.includes("mentions=1") && out.includes("total=42"), "the script's output: " + out.slice(0, 300));
    await shot("transcript");
  });

  await step("markup in a transcript renders as text and never runs", async () => {
    await open("#/session/dash-xss", "session");
    await page.waitForSelector("[data-testid=message]");
    const body = await page.$eval("main", (m) => m.innerText);
    check(body.includes('<script>window.__mibyanXss = "user"</script>'), "user markup visible as text");
    check(body.includes('<script>window.__mibyanXss = "answer"</script>'), "answer markup visible as text");
    // The tool result (read_file of a file with a script tag) is text too.
    const results = await page.$$eval("[data-testid=tool-call] .result", (rs) => rs.map((r) => r.textContent).join("\n"));
    check(results.includes('window.__mibyanXss = \\"tool\\"') || results.includes('window.__mibyanXss = "tool"'), "tool markup visible: " + results.slice(0, 300));
    check((await count("main script, main img, main iframe, main b")) === 0, "no element made from transcript text");
    await new Promise((r) => setTimeout(r, 300));
    check((await page.evaluate(() => window.__mibyanXss)) === undefined, "no injected script ran");
  });

  await step("delete a session after a confirmation, export JSONL", async () => {
    const exported = await page.evaluate(async () => {
      const r = await fetch("/ui/api/sessions/dash-exec/export");
      return { status: r.status, type: r.headers.get("Content-Type"), body: await r.text() };
    });
    check(exported.status === 200 && /ndjson/.test(exported.type || ""), "export " + exported.status + " " + exported.type);
    const lines = exported.body.trim().split("\n").map((l) => JSON.parse(l));
    check(lines.length >= 4 && lines.some((m) => m.role === "tool"), "export lines " + lines.length);
    await open("#/sessions");
    await page.click('tr[data-session-id="dash-delete-me"] [data-testid=delete-session]');
    await page.waitForSelector("[data-testid=confirm-dialog][open]");
    // Cancel first: nothing happens.
    await page.click("dialog[open] button[value=cancel]");
    await new Promise((r) => setTimeout(r, 200));
    check((await apiGet("/ui/api/sessions/dash-delete-me")).status === 200, "cancel keeps the session");
    await page.click('tr[data-session-id="dash-delete-me"] [data-testid=delete-session]');
    await confirmDialog();
    await waitFor(async () => (await apiGet("/ui/api/sessions/dash-delete-me")).status === 404, "the session deleted");
    await page.waitForFunction(() => !document.querySelector('tr[data-session-id="dash-delete-me"]'));
  });

  await step("a state-changing request without the CSRF token is refused", async () => {
    const res = await page.evaluate(async () => {
      const out = {};
      let r = await fetch("/ui/api/sessions/dash-xss", { method: "DELETE" });
      out.noToken = r.status;
      r = await fetch("/ui/api/sessions/dash-xss", { method: "DELETE", headers: { "X-CSRF-Token": "forged-token" } });
      out.forged = r.status;
      r = await fetch("/v1/approvals/ap-none", { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"choice":"deny"}' });
      out.approvalNoToken = r.status;
      r = await fetch("/ui/api/sessions/dash-xss");
      out.stillThere = r.status;
      return out;
    });
    check(res.noToken === 403, "DELETE without X-CSRF-Token: " + res.noToken);
    check(res.forged === 403, "DELETE with a forged token: " + res.forged);
    check(res.approvalNoToken === 403, "POST /v1/approvals without the token: " + res.approvalNoToken);
    check(res.stillThere === 200, "nothing deleted: " + res.stillThere);
  });

  await step("live page streams a turn's deltas and tool events", async () => {
    await open("#/live");
    await page.waitForFunction(() => document.querySelector("[data-testid=live-connection]").textContent === "Connected");
    await control("/__reset", {});
    await script({ body: reply("", [["call_live", "terminal", { command: "echo live-tool-output" }]]) });
    const pieces = ["Streaming ", "the ", "live ", "answer ", "word ", "by ", "word."];
    await script({ chunks: streamed(pieces), chunk_ms: 350, headers: { "Content-Type": "text/event-stream" } });
    const turn = chat("dash-live", "Stream something slowly.", { stream: true });
    await page.waitForSelector('[data-testid=live-turn][data-session-id="dash-live"]');
    const sel = '[data-testid=live-turn][data-session-id="dash-live"]';
    await page.waitForFunction((s) => {
      const t = document.querySelector(s + " [data-testid=live-tool]");
      return t && t.textContent.includes("terminal") && t.textContent.includes("done");
    }, {}, sel);
    // Part of the text first, then all of it: it arrives as it is written.
    const partial = await waitFor(async () => {
      const t = await page.$eval(sel + " [data-testid=live-output]", (e) => e.textContent);
      return t.length > 0 && t !== pieces.join("") ? t : null;
    }, "a partial live output");
    check(pieces.join("").startsWith(partial), "partial output is a prefix: " + JSON.stringify(partial));
    await shot("live");
    const done = await turn;
    check(done.status === 200, "the streamed turn: " + done.status);
    await page.waitForFunction((s) => document.querySelector(s + " [data-testid=live-output]").textContent === "Streaming the live answer word by word.", {}, sel);
    await page.waitForFunction((s) => document.querySelector(s).classList.contains("ended"), {}, sel);
  });

  await step("interrupt a running turn from the live page", async () => {
    await control("/__reset", {});
    await script({ body: reply("too late"), delay_ms: 20000 });
    const turn = chat("dash-interrupt", "Take your time.");
    const sel = '[data-testid=live-turn][data-session-id="dash-interrupt"]';
    await page.waitForSelector(sel + " [data-testid=interrupt]");
    await page.click(sel + " [data-testid=interrupt]");
    const r = await turn;
    check(r.status === 503 && r.text.includes("turn_interrupted"), "interrupted turn answer: " + r.status + " " + r.text);
    await page.waitForFunction((s) => document.querySelector(s).classList.contains("ended"), {}, sel);
  });

  await step("approve a pending command and the turn goes on", async () => {
    const target = path.join(WORK, "approve-me");
    fs.mkdirSync(path.join(target, "sub"), { recursive: true });
    await control("/__reset", {});
    await script({ body: reply("", [["call_ok", "terminal", { command: "rm -rf " + target }]]) });
    await script({ body: reply("Removed the directory as approved.") });
    await open("#/live");
    await page.waitForFunction(() => document.querySelector("[data-testid=live-connection]").textContent === "Connected");
    const turn = chat("dash-approve", "Clean up the approve-me directory.");
    // The live stream announces the waiting command.
    await page.waitForFunction((t) => {
      const b = document.querySelector(".approval-banner");
      return b && !b.hidden && b.textContent.includes("rm -rf " + t);
    }, {}, target);
    await open("#/approvals");
    const card = await page.waitForSelector("[data-testid=approval]", { timeout: 30000 });
    const cmd = await card.$eval("[data-testid=approval-command]", (e) => e.textContent);
    check(cmd.includes("rm -rf " + target), "approval shows the command: " + cmd);
    const cardText = await card.evaluate((e) => e.textContent);
    check(cardText.includes("dash-approve"), "approval shows the session");
    check(/recursive/i.test(cardText), "approval shows the reason: " + cardText.slice(0, 300));
    const choices = await card.$$eval("button[data-choice]", (bs) => bs.map((b) => b.dataset.choice));
    check(["once", "session", "always", "deny"].every((c) => choices.includes(c)), "choices " + choices);
    await shot("approvals");
    await card.$eval("button[data-choice=once]", (b) => b.click());
    const r = await turn;
    check(r.status === 200 && r.json && r.json.choices[0].message.content === "Removed the directory as approved.",
          "the turn went on to its answer: " + r.status + " " + r.text.slice(0, 300));
    check(!fs.existsSync(target), "the approved command ran");
    const seen = await toolResultSeen("call_ok");
    check(seen !== null && !/denied|blocked/i.test(seen), "the model saw the command's result: " + seen);
    await page.waitForFunction(() => !document.querySelector("[data-testid=approval]"));
  });

  await step("deny another pending command and the turn goes on", async () => {
    const target = path.join(WORK, "deny-me");
    fs.mkdirSync(path.join(target, "sub"), { recursive: true });
    await control("/__reset", {});
    await script({ body: reply("", [["call_no", "terminal", { command: "rm -r " + target }]]) });
    await script({ body: reply("Understood, I left it alone.") });
    const turn = chat("dash-deny", "Remove the deny-me directory.");
    await open("#/approvals");
    const card = await page.waitForSelector("[data-testid=approval]", { timeout: 30000 });
    check((await card.$eval("[data-testid=approval-command]", (e) => e.textContent)).includes(target), "the second command");
    const approvalId = await card.evaluate((e) => e.dataset.approvalId);
    await card.$eval("button[data-choice=deny]", (b) => b.click());
    const r = await turn;
    check(r.status === 200 && r.json && r.json.choices[0].message.content === "Understood, I left it alone.",
          "the turn went on after the denial: " + r.status + " " + r.text.slice(0, 300));
    check(fs.existsSync(target), "the denied command did not run");
    const seen = await toolResultSeen("call_no");
    check(seen !== null && /den(y|ied)|block|not approved|refused/i.test(seen), "the model was told it was denied: " + seen);
    // Nothing is left pending, and a second answer to it is refused.
    const again = await page.evaluate(async (id) => {
      const list = await (await fetch("/v1/approvals")).json();
      const who = await (await fetch("/ui/api/whoami")).json();
      const r = await fetch("/v1/approvals/" + encodeURIComponent(id), {
        method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": who.csrf },
        body: JSON.stringify({ choice: "once" }) });
      return { pending: (list.data || []).length, second: r.status };
    }, approvalId);
    check(again.pending === 0, "nothing pending afterwards");
    check(again.second === 409 || again.second === 404, "a second answer is refused: " + again.second);
  });

  await step("answer a clarifying question and the turn goes on", async () => {
    await control("/__reset", {});
    await script({ body: reply("", [["call_ask", "clarify",
      { question: "Which colour should the <b>report</b> use?", choices: ["blue", "green"] }]]) });
    await script({ body: reply("Using green for the report.") });
    const turn = chat("dash-clarify", "Make me a report.");
    await open("#/approvals");
    const card = await page.waitForSelector("[data-testid=clarification]", { timeout: 30000 });
    const q = await card.$eval(".question", (e) => e.textContent);
    check(q === "Which colour should the <b>report</b> use?", "the question as text: " + q);
    // A suggested answer fills the box; the person may still edit it.
    await clickText("[data-testid=clarification] .choices button", "green");
    const typed = await card.$eval("[data-testid=clarify-answer]", (e) => e.value);
    check(typed === "green", "choice filled in: " + typed);
    await card.$eval("form", (f) => f.requestSubmit());
    const r = await turn;
    check(r.status === 200 && r.json && r.json.choices[0].message.content === "Using green for the report.",
          "the turn went on with the answer: " + r.status + " " + r.text.slice(0, 300));
    const seen = await toolResultSeen("call_ask");
    check(seen !== null && seen.includes("green"), "the model got the answer: " + seen);
    await page.waitForFunction(() => !document.querySelector("[data-testid=clarification]"));
  });

  await step("kernels page lists the script's kernel; reset and stop", async () => {
    const rowsNow = () => page.$$eval("[data-testid=kernels] tbody tr", (rs) => rs.map((r) => r.textContent));
    const clickIn = (sid, label) => page.$$eval("[data-testid=kernels] tbody tr", (rs, sid, label) => {
      const r = rs.find((x) => x.textContent.includes(sid));
      if (!r) throw new Error("no kernel row for " + sid);
      [...r.querySelectorAll("button")].find((b) => b.textContent === label).click();
    }, sid, label);
    await open("#/kernels");
    await waitFor(async () => (await rowsNow()).some((r) => r.includes("dash-exec")), "the kernel of dash-exec listed");
    await shot("kernels");
    // Reset ends the session's kernels: the row goes, the session stays.
    await clickIn("dash-exec", "Reset");
    await confirmDialog();
    await page.waitForSelector(".notice.ok");
    await waitFor(async () => !(await rowsNow()).some((r) => r.includes("dash-exec")), "the reset kernel leaves the list");
    // A new kernel for another session, then Stop closes that session.
    await control("/__reset", {});
    await script({ body: reply("", [["call_k2", "execute_code", { code: "x = 41\nprint(x + 1)" }]]) });
    await script({ body: reply("42.") });
    const r = await chat("dash-kernel-2", "Compute something.");
    check(r.status === 200, "dash-kernel-2 turn: " + r.status);
    await page.click("[data-testid=page-kernels] .page-actions button");
    await waitFor(async () => (await rowsNow()).some((x) => x.includes("dash-kernel-2")), "the new kernel is listed");
    await clickIn("dash-kernel-2", "Stop");
    await confirmDialog();
    await waitFor(async () => !(await rowsNow()).some((x) => x.includes("dash-kernel-2")), "the stopped kernel leaves the list");
    check((await apiGet("/ui/api/sessions/dash-kernel-2")).status === 200, "a stopped session stays stored");
  });

  await step("cluster page", async () => {
    await open("#/cluster");
    const t = await text("[data-testid=cluster]");
    check(/serves no cluster|members/.test(t), "cluster text: " + t);
    await shot("cluster");
  });

  await step("MCP page: state, tools, last error, reconnect", async () => {
    await open("#/mcp");
    await waitFor(async () => (await page.$$eval("[data-testid=mcp] tbody tr", (rs) => rs.map((r) => r.textContent))).some((t) => /files/.test(t) && /ready|connected|running/i.test(t)),
                  "the files server connected", 60000);
    const rows = await page.$$eval("[data-testid=mcp] tbody tr", (rs) => rs.map((r) => r.textContent));
    const broken = rows.find((r) => r.includes("broken"));
    check(broken && !/–$/.test(broken), "the broken server shows its last error: " + broken);
    await page.$$eval("[data-testid=mcp] tbody tr", (rs) => {
      const r = rs.find((x) => x.textContent.includes("broken"));
      r.querySelector("button").click();
    });
    await page.waitForSelector(".notice.ok, .notice.error");
    const failed = await text("[data-testid=page-mcp] .notice");
    check(/broken/.test(failed), "the reconnect's outcome is reported: " + failed);
    // Unfold the connected server's tool list for the screenshot.
    await page.$$eval("[data-testid=mcp] details.tools", (ds) => ds.forEach((d) => { d.open = true; }));
    await shot("mcp");
  });

  await step("config page: masked secrets and check results", async () => {
    await open("#/config");
    const body = await page.$eval("main", (m) => m.innerText);
    check(!body.includes(KEY), "the server key is not shown");
    check(body.includes("approvals.http"), "approvals.http listed");
    check((await count("[data-testid=config-check]")) === 1, "check results section");
    await shot("config");
  });

  await step("usage page draws charts", async () => {
    await open("#/usage?days=7");
    await page.waitForSelector("[data-testid=chart-tokens] canvas");
    check((await count("figure.chart canvas")) >= 3, "three or more charts");
    const models = await page.$$eval("[data-testid=usage-by-model] tbody tr", (rs) => rs.map((r) => r.textContent));
    check(models.length >= 1, "per-model rows");
    await shot("usage");
  });

  await step("no script error, no CSP violation, no injected script", async () => {
    await checkNoPageErrors(page, report);
  });

  await step("log out: the API refuses the old cookie", async () => {
    await page.click("[data-testid=logout]");
    await page.waitForSelector("[data-testid=login-form]");
    const s = await page.evaluate(async () => (await fetch("/ui/api/sessions")).status);
    check(s === 401, "sessions after logout: " + s);
  });
}

await runAndReport(main, report, () => browser, REPORT, "dashboard");
