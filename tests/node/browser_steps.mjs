// What the dashboard browser scripts (dashboard_browser.mjs,
// jobs_browser.mjs) share: named steps that record into a report, the page
// hooks that collect CSP violations and console errors, hash navigation
// that waits for the page to be ready, the final no-error check, and the
// run-and-report ending. The report is {"ok", "steps":[{name, ok, error?,
// ms}], "pages":[...], "console_errors":[...], ...}.
import fs from "node:fs";
import { check } from "./scripted_provider.mjs";

// Runs `fn` as the step `name`; records its result in report.steps (a
// failure does not stop the script). `onFail(name)` runs after a failure.
export async function runStep(report, name, fn, onFail = null) {
  const t0 = Date.now();
  try {
    await fn();
    report.steps.push({ name, ok: true, ms: Date.now() - t0 });
    console.log("ok   " + name);
  } catch (e) {
    report.steps.push({ name, ok: false, error: String(e && e.stack || e), ms: Date.now() - t0 });
    console.log("FAIL " + name + ": " + (e && e.message));
    if (onFail) await onFail(name);
  }
}

// Collects CSP violations (window.__cspViolations) in every document `page`
// loads, and its console errors and page errors in report.console_errors.
export async function watchPage(page, report) {
  await page.evaluateOnNewDocument(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI));
  });
  page.on("console", (m) => { if (m.type() === "error") report.console_errors.push(m.text()); });
  page.on("pageerror", (e) => report.console_errors.push("pageerror: " + e.message));
}

// Hash navigation inside the one document (the cookie and the CSRF token
// stay, as when a person clicks the navigation) to `route`; waits until
// the page `pageName` says it is ready.
export async function openRoute(page, route, pageName) {
  await page.evaluate((r) => {
    delete document.getElementById("main").dataset.ready;
    if (location.hash === r) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = r;
  }, route);
  await page.waitForFunction((p) => {
    const m = document.getElementById("main");
    return m && m.dataset.ready === p && !m.hasAttribute("aria-busy");
  }, { timeout: 30000 }, pageName);
}

// Throws unless the page saw no CSP violation, no console error (other
// than the HTTP statuses the pages expect) and no injected script ran.
// Keeps the CSP violations in report.csp_violations when the report has
// that list.
export async function checkNoPageErrors(page, report) {
  const violations = await page.evaluate(() => window.__cspViolations);
  if (report.csp_violations) report.csp_violations = violations;
  check(violations.length === 0, "CSP violations: " + violations.join("; "));
  const errs = report.console_errors.filter((e) => !/status of (40[134]|409|429)/.test(e));
  check(errs.length === 0, "console errors: " + errs.join("; "));
  check((await page.evaluate(() => window.__mibyanXss)) === undefined, "no injected script ran");
}

// Runs `main`, closes the browser `getBrowser()` returns, writes the report
// to `reportPath` and exits: 0 (printing "OK <label>") only when every step
// passed.
export async function runAndReport(main, report, getBrowser, reportPath, label) {
  try {
    await main();
  } catch (e) {
    report.steps.push({ name: "setup", ok: false, error: String(e && e.stack || e) });
    console.log("FAIL setup: " + (e && e.message));
  } finally {
    const browser = getBrowser();
    if (browser) await browser.close().catch(() => {});
    report.ok = report.steps.length > 0 && report.steps.every((s) => s.ok);
    if (reportPath) fs.writeFileSync(reportPath, JSON.stringify(report, null, 2));
    console.log(report.ok ? "OK " + label : "FAILED " + label);
    process.exit(report.ok ? 0 : 1);
  }
}
