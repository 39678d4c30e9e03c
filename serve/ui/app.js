// The dashboard's entry point: asks whoami, shows the login page when the
// server wants a key, then runs the hash router. Pages are modules in
// js/pages/ exporting `render(root, params, ctx)`; render may return a cleanup
// function, called when the route changes (closes event streams, timers).

import { h, clear } from "./js/dom.js";
import * as api from "./js/api.js";
import { parseHash } from "./js/router.js";
import { renderLogin } from "./js/pages/login.js";

const PAGES = {
  sessions: () => import("./js/pages/sessions.js"),
  session: () => import("./js/pages/transcript.js"),
  live: () => import("./js/pages/live.js"),
  approvals: () => import("./js/pages/approvals.js"),
  jobs: () => import("./js/pages/jobs.js"),
  kernels: () => import("./js/pages/kernels.js"),
  cluster: () => import("./js/pages/cluster.js"),
  mcp: () => import("./js/pages/mcp.js"),
  config: () => import("./js/pages/config.js"),
  usage: () => import("./js/pages/usage.js"),
};

const TITLES = {
  sessions: "Sessions", session: "Transcript", live: "Live", approvals: "Approvals",
  jobs: "Jobs", kernels: "Kernels", cluster: "Cluster", mcp: "MCP servers", config: "Config", usage: "Usage",
};

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const account = document.getElementById("account");
let cleanup = null;
let whoami = { auth_required: false, logged_in: false, csrf: "" };
let routeSeq = 0;

function setNavCurrent(page) {
  const current = page === "session" ? "sessions" : page;
  for (const a of nav.querySelectorAll("a[data-page]")) {
    if (a.dataset.page === current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function renderAccount() {
  clear(account);
  if (whoami.auth_required && whoami.logged_in) {
    account.appendChild(h("button.btn.small", {
      type: "button", "data-testid": "logout",
      onclick: async () => {
        try { await api.post("/ui/api/logout"); } catch (e) { /* logged out either way */ }
        api.setCsrf("");
        whoami = { ...whoami, logged_in: false, csrf: "" };
        showLogin();
      },
    }, "Log out"));
  }
}

function showLogin(message) {
  if (cleanup) { try { cleanup(); } catch (e) { /* page already gone */ } cleanup = null; }
  document.body.classList.add("logged-out");
  nav.hidden = true;
  renderAccount();
  clear(main);
  renderLogin(main, message, (csrfToken) => {
    api.setCsrf(csrfToken);
    whoami = { ...whoami, logged_in: true, csrf: csrfToken };
    document.body.classList.remove("logged-out");
    nav.hidden = false;
    renderAccount();
    route();
  });
}

async function route() {
  const seq = ++routeSeq;
  if (whoami.auth_required && !whoami.logged_in) { showLogin(); return; }
  const { page, params } = parseHash(location.hash);
  if (!PAGES[page]) { location.replace("#/sessions"); return; }
  if (cleanup) { try { cleanup(); } catch (e) { /* ignore */ } cleanup = null; }
  setNavCurrent(page);
  if (badgeTimer) refreshBadge();
  document.title = TITLES[page] + " · Mibyan console";
  clear(main);
  main.dataset.page = page;
  main.setAttribute("aria-busy", "true");
  let mod;
  try {
    mod = await PAGES[page]();
  } catch (e) {
    main.appendChild(h("p.notice.error", { role: "alert" }, "This page failed to load: " + e.message));
    main.removeAttribute("aria-busy");
    return;
  }
  if (seq !== routeSeq) return;
  const root = h("section.page", { "data-testid": "page-" + page });
  main.appendChild(root);
  try {
    const result = await mod.render(root, params, { whoami, navigate });
    if (seq !== routeSeq) { if (typeof result === "function") result(); return; }
    cleanup = typeof result === "function" ? result : null;
  } catch (e) {
    root.appendChild(h("p.notice.error", { role: "alert" }, e.message || String(e)));
  }
  main.removeAttribute("aria-busy");
  main.dataset.ready = page;
  const heading = root.querySelector("h1");
  if (heading && !params.keepFocus) { heading.tabIndex = -1; heading.focus({ preventScroll: true }); }
}

// The navigation's count of approvals and questions waiting, refreshed
// every BADGE_MS on every page (the Approvals page also sets it). A node
// without the approvals endpoints just shows no badge.
const BADGE_MS = 5000;
let badgeTimer = null;
async function refreshBadge() {
  const badge = document.getElementById("approvals-badge");
  if (whoami.auth_required && !whoami.logged_in) { badge.hidden = true; return; }
  let n = 0;
  for (const p of ["/v1/approvals", "/v1/clarifications"]) {
    try {
      const res = await api.get(p, undefined, { noAuthRedirect: true });
      n += Array.isArray(res && res.data) ? res.data.length : 0;
    } catch (e) { /* not available on this node */ }
  }
  badge.hidden = n === 0;
  badge.textContent = String(n);
}
function startBadge() {
  if (badgeTimer) return;
  const tick = async () => { await refreshBadge(); badgeTimer = setTimeout(tick, BADGE_MS); };
  tick();
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

async function boot() {
  // A 401 means the cookie ended only if whoami agrees (an endpoint that
  // takes no cookie answers 401 too); then the login page comes back.
  let checking = false;
  api.setUnauthorisedHandler(async () => {
    if (!whoami.auth_required || !whoami.logged_in || checking) return;
    checking = true;
    try {
      const now = await api.get("/ui/api/whoami", undefined, { noAuthRedirect: true });
      if (!now.logged_in) {
        whoami = { ...whoami, logged_in: false, csrf: "" };
        api.setCsrf("");
        showLogin("Your session ended; enter the key again.");
      }
    } catch (e) { /* the node is unreachable: the page shows its own error */ }
    checking = false;
  });
  try {
    whoami = await api.get("/ui/api/whoami", undefined, { noAuthRedirect: true });
  } catch (e) {
    clear(main);
    main.appendChild(h("p.notice.error", { role: "alert" },
      "The console cannot reach the node: " + e.message));
    return;
  }
  api.setCsrf(whoami.csrf || "");
  renderAccount();
  window.addEventListener("hashchange", route);
  if (!location.hash) history.replaceState(null, "", "#/sessions");
  route();
  startBadge();
}

boot();
