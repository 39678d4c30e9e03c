// DOM construction for the dashboard. Every value that came from the server
// becomes a text node (createTextNode / textContent); nothing here parses
// HTML, so a transcript holding "<script>" shows those characters. No
// function in this module takes markup.

// h("tag#id.class1.class2", {attr: value, onclick: fn}, child, ...)
// Children: strings and numbers become text nodes, null/undefined/false are
// skipped, arrays are flattened, Nodes are appended as they are.
// Attributes: "class", "for", data-* and aria-* are set with setAttribute;
// on* keys add event listeners; "text" sets textContent. The attribute
// "style" is refused (the CSP forbids inline style attributes).
export function h(spec, attrs, ...children) {
  const [head, ...classes] = spec.split(".");
  const [tag, id] = head.split("#");
  const el = document.createElement(tag || "div");
  if (id) el.id = id;
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "style") throw new Error("inline style attributes are not allowed (CSP)");
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "text") {
      el.textContent = String(v);
    } else if (k === "class") {
      el.className = el.className ? el.className + " " + v : v;
    } else if (k in el && typeof v !== "string" && k !== "list") {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// Text with the ranges [[start, end], ...] (UTF-16 code units, the unit of
// JS string indices) wrapped in <mark>. Ranges out of order, overlapping or
// out of bounds are clamped and skipped, never trusted.
export function highlighted(text, ranges) {
  const frag = document.createDocumentFragment();
  const s = String(text ?? "");
  const sorted = (Array.isArray(ranges) ? ranges : [])
    .filter((r) => Array.isArray(r) && r.length >= 2 && Number.isFinite(r[0]) && Number.isFinite(r[1]))
    .map((r) => [Math.max(0, Math.min(s.length, r[0] | 0)), Math.max(0, Math.min(s.length, r[1] | 0))])
    .filter((r) => r[1] > r[0])
    .sort((a, b) => a[0] - b[0]);
  let pos = 0;
  for (const [a, b] of sorted) {
    if (a < pos) continue;
    if (a > pos) frag.appendChild(document.createTextNode(s.slice(pos, a)));
    frag.appendChild(h("mark", s.slice(a, b)));
    pos = b;
  }
  if (pos < s.length) frag.appendChild(document.createTextNode(s.slice(pos)));
  return frag;
}

// A window of about `width` characters of `text` around its first range,
// with the ranges moved into the window. Returns {text, ranges}.
export function snippet(text, ranges, width = 320) {
  const s = String(text ?? "");
  if (s.length <= width) return { text: s, ranges: ranges || [] };
  const first = (ranges && ranges.length) ? Math.max(0, ranges[0][0] | 0) : 0;
  let start = Math.max(0, first - Math.floor(width / 3));
  const end = Math.min(s.length, start + width);
  start = Math.max(0, end - width);
  const pre = start > 0 ? "…" : "";
  const post = end < s.length ? "…" : "";
  const shift = start - pre.length;
  const moved = (ranges || [])
    .map((r) => [r[0] - shift, r[1] - shift])
    .filter((r) => r[0] >= pre.length && r[1] <= pre.length + (end - start));
  return { text: pre + s.slice(start, end) + post, ranges: moved };
}

// A <details> that holds `body` and starts closed when `long` is true;
// `summary` is text or a node.
export function collapsible(summary, body, open = false, cls = "") {
  return h("details" + (cls ? "." + cls : ""), { open },
    h("summary", summary), body);
}

// Modal confirmation with a native <dialog>. Resolves true on confirm.
export function confirmDialog(title, message, confirmLabel = "Confirm", danger = true) {
  return new Promise((resolve) => {
    const ok = h("button.btn" + (danger ? ".danger" : ".primary"), { type: "submit", value: "ok" }, confirmLabel);
    const cancel = h("button.btn", { type: "submit", value: "cancel" }, "Cancel");
    const heading = h("h2", { id: "confirm-title" }, title);
    const dlg = h("dialog.confirm", { "aria-labelledby": "confirm-title", "data-testid": "confirm-dialog" },
      h("form", { method: "dialog" },
        heading,
        h("p", message),
        h("div.dialog-actions", cancel, ok)));
    dlg.addEventListener("close", () => {
      resolve(dlg.returnValue === "ok");
      dlg.remove();
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// A small status line region (role=status) that pages use for feedback.
export function notice(kind, text) {
  return h("p.notice." + kind, { role: kind === "error" ? "alert" : "status" }, text);
}
