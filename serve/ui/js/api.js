// The dashboard's HTTP client. Same origin only; the session cookie
// (mibyan_ui, HttpOnly) travels by itself, and every state-changing request
// (POST, DELETE) carries X-CSRF-Token with the token from login/whoami.
// Errors come back as ApiError with the server's {"error":{message,type,code}}.

let csrfToken = "";
let onUnauthorised = null;

export function setCsrf(token) { csrfToken = token || ""; }
export function csrf() { return csrfToken; }

// `fn` runs when a request gets 401 (the cookie expired or was revoked).
export function setUnauthorisedHandler(fn) { onUnauthorised = fn; }

export class ApiError extends Error {
  constructor(status, message, type = "", code = "") {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
  }
}

async function errorOf(res) {
  let message = res.status + " " + (res.statusText || "error");
  let type = "", code = "";
  try {
    const body = await res.json();
    if (body && body.error) {
      message = String(body.error.message || message);
      type = String(body.error.type || "");
      code = String(body.error.code || "");
    }
  } catch (e) { /* not JSON: keep the status line */ }
  return new ApiError(res.status, message, type, code);
}

// request("GET", "/ui/api/sessions", {query: {limit: 20}}) -> parsed JSON.
// Options: body (JSON-encoded), query (object), raw (return the Response).
export async function request(method, path, opts = {}) {
  let url = path;
  if (opts.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query))
      if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
    const qs = q.toString();
    if (qs) url += (url.includes("?") ? "&" : "?") + qs;
  }
  const headers = { "Accept": "application/json" };
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (method !== "GET" && method !== "HEAD") {
    if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (e) {
    throw new ApiError(0, "The server cannot be reached (" + e.message + ")", "network");
  }
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && onUnauthorised && !opts.noAuthRedirect) onUnauthorised(err);
    throw err;
  }
  if (opts.raw) return res;
  if (res.status === 204) return null;
  const type = res.headers.get("Content-Type") || "";
  if (!type.includes("json")) return res.text();
  return res.json();
}

export const get = (path, query, opts = {}) => request("GET", path, { ...opts, query });
export const post = (path, body, opts = {}) => request("POST", path, { ...opts, body: body === undefined ? {} : body });
export const del = (path, opts = {}) => request("DELETE", path, opts);

// Path segment encoding for ids in URLs.
export const seg = (s) => encodeURIComponent(String(s));
