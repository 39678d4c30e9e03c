// Drives the dashboard's Jobs page (serve/ui/js/pages/jobs.js) of a real
// `mibyan serve` in headless Chromium with puppeteer-core, as
// dashboard_browser.mjs does for the other pages. Run by
// tests/jobs_browser_test.cpp as `node jobs_browser.mjs` with, in the
// environment:
//   SERVE_URL     http://127.0.0.1:PORT of a serve started with a key and
//                 the scripted provider, whose store holds the job JOB_ID
//                 ("every 1d", deliver dashboard) and the job OTHER_ID
//   SERVE_KEY     that key
//   PROVIDER_URL  the scripted provider (tests/support/http_server.py)
//   JOB_ID, OTHER_ID
//   CHROMIUM      the browser (default /usr/bin/chromium)
//   REPORT_PATH   where the JSON report goes
//   SCREENSHOT_DIR optional: PNGs of the pages
// The report is {"ok","steps":[{name, ok, error?, ms}],"pages":[...]};
// exit status 0 only when every step passed.
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { check, control, reply, script } from "./scripted_provider.mjs";
import { checkNoPageErrors, openRoute, runAndReport, runStep, watchPage } from "./browser_steps.mjs";

const SERVE = process.env.SERVE_URL;
const KEY = process.env.SERVE_KEY || "";
const JOB = process.env.JOB_ID;
const OTHER = process.env.OTHER_ID;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const REPORT = process.env.REPORT_PATH;
const SHOTS = process.env.SCREENSHOT_DIR || "";
const UI = SERVE + "/ui/";
const ANSWER = "JOBS-PAGE-ANSWER <b>not bold</b> <script>window.__mibyanXss = 'job'</script>";

const report = { ok: false, steps: [], pages: [], console_errors: [] };
let browser, page;

const step = (name, fn) => runStep(report, name, fn);

async function open(route) {
  await openRoute(page, route, route.replace(/^#\//, "").split(/[/?]/)[0]);
  if (!report.pages.includes(route)) report.pages.push(route);
}

async function shot(name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, "dashboard-" + name + ".png"), type: "png" });
}

async function apiGet(p) {
  const r = await fetch(SERVE + p, { headers: { Authorization: "Bearer " + KEY } });
  return { status: r.status, body: await r.json().catch(() => null) };
}

const rowOf = (id) => "tr[data-job-id='" + id + "']";

// Clicks the element `sel` finds, found and clicked in one step inside the
// page: the pages re-render every few seconds (polling), so a handle taken
// earlier may already be detached.
async function clickSel(sel) {
  await page.waitForSelector(sel);
  await page.$eval(sel, (e) => e.click());
}

async function main() {
  check(SERVE && JOB && OTHER && REPORT, "SERVE_URL, JOB_ID, OTHER_ID and REPORT_PATH are set");
  await control("/__reset", {});
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // --no-sandbox: root in a container (see dashboard_browser.mjs).
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--no-default-browser-check", "--disable-extensions", "--lang=en-US"],
    defaultViewport: { width: 1280, height: 800 },
  });
  page = await browser.newPage();
  page.setDefaultTimeout(30000);
  await watchPage(page, report);

  await step("log in and open the Jobs page from the navigation", async () => {
    await page.goto(UI, { waitUntil: "load" });
    await page.waitForSelector("[data-testid=login-form]");
    await page.type("#login-key", KEY);
    await page.click("[data-testid=login-form] button[type=submit]");
    await page.waitForFunction(() => document.getElementById("main").dataset.ready === "sessions");
    await page.click("#nav a[data-page=jobs]");
    await page.waitForFunction(() => document.getElementById("main").dataset.ready === "jobs");
    report.pages.push("#/jobs");
    const current = await page.$eval("#nav a[data-page=jobs]", (a) => a.getAttribute("aria-current"));
    check(current === "page", "the Jobs link is current: " + current);
  });

  await step("the list shows each job's schedule, next run and state", async () => {
    await open("#/jobs");
    await page.waitForSelector(rowOf(JOB));
    const row = await page.$eval(rowOf(JOB), (r) => r.innerText);
    check(row.includes("every day") || row.includes("every 1d") || row.includes("every 24"), "schedule in words: " + row);
    check(/\d{4}-\d\d-\d\d \d\d:\d\d/.test(row), "next run time: " + row);
    check(row.includes("scheduled"), "state badge: " + row);
    check((await page.$$(rowOf(OTHER))).length === 1, "the other job is listed");
    await shot("jobs");
  });

  await step("pause and resume a job from the list", async () => {
    await clickSel(rowOf(OTHER) + " [data-testid=job-pause]");
    await page.waitForFunction((sel) => {
      const r = document.querySelector(sel);
      return r && r.innerText.includes("paused") && r.querySelector("[data-testid=job-resume]");
    }, {}, rowOf(OTHER));
    let j = await apiGet("/ui/api/jobs/" + OTHER);
    check(j.body.job.paused === true, "paused in the store");
    await clickSel(rowOf(OTHER) + " [data-testid=job-resume]");
    await page.waitForFunction((sel) => {
      const r = document.querySelector(sel);
      return r && r.querySelector("[data-testid=job-pause]");
    }, {}, rowOf(OTHER));
    j = await apiGet("/ui/api/jobs/" + OTHER);
    check(j.body.job.paused === false, "resumed in the store");
  });

  await step("run a job now: its run, answer and transcript appear", async () => {
    await script({ body: reply(ANSWER) });
    await clickSel(rowOf(JOB) + " [data-testid=job-run]");
    await page.waitForFunction(() => /Started a run/.test(document.getElementById("main").innerText));
    await clickSel(rowOf(JOB) + " [data-testid=job-link]");
    await page.waitForFunction(() => document.getElementById("main").dataset.ready === "jobs"
      && document.querySelector("[data-testid=job-detail]"));
    report.pages.push("#/jobs/ID");
    // The page polls: wait for the finished run.
    await page.waitForFunction(() => {
      const r = document.querySelector("[data-testid=job-runs] tr[data-run-id]");
      return r && r.dataset.status === "ok";
    }, { timeout: 60000 });
    const delivered = await page.$eval("[data-testid=job-delivered]", (d) => d.innerText);
    check(delivered.includes("JOBS-PAGE-ANSWER <b>not bold</b>"), "the delivered answer as text: " + delivered);
    check((await page.$$("[data-testid=job-delivered] b")).length === 0, "no markup from the answer");
    await shot("job");
    // The run links to its session's transcript.
    await clickSel("[data-testid=job-runs] [data-testid=run-session]");
    await page.waitForFunction(() => document.getElementById("main").dataset.ready === "session");
    const transcript = await page.$eval("main", (m) => m.innerText);
    check(transcript.includes("JOBS-PAGE-ANSWER"), "the transcript has the answer");
  });

  await step("delete a job after confirming", async () => {
    await open("#/jobs/" + encodeURIComponent(OTHER));
    await clickSel("[data-testid=job-delete]");
    await page.waitForSelector("dialog[open] button[value=ok]");
    await page.click("dialog[open] button[value=ok]");
    await page.waitForFunction(() => location.hash === "#/jobs"
      && document.getElementById("main").dataset.ready === "jobs");
    const r = await apiGet("/ui/api/jobs/" + OTHER);
    check(r.status === 404, "deleted: " + r.status);
    check((await page.$$(rowOf(OTHER))).length === 0, "gone from the list");
  });

  await step("an unknown job shows an error, not a broken page", async () => {
    await open("#/jobs/job_0000000000000000");
    const text = await page.$eval("main", (m) => m.innerText);
    check(/no job/i.test(text), "error shown: " + text);
  });

  await step("no script error, no CSP violation, no injected script", async () => {
    await checkNoPageErrors(page, report);
  });
}

await runAndReport(main, report, () => browser, REPORT, "jobs");
