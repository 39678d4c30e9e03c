// Hash routes: "#/PAGE[/ID][?k=v&...]". parseHash returns {page, params}
// with params.id for the path segment after the page (decoded) and every
// query pair; hashFor builds such a hash from the same pieces.

export function parseHash(hash) {
  let h = String(hash || "").replace(/^#/, "");
  if (!h.startsWith("/")) h = "/" + h;
  const q = h.indexOf("?");
  const path = q < 0 ? h : h.slice(0, q);
  const query = q < 0 ? "" : h.slice(q + 1);
  const parts = path.split("/").filter(Boolean);
  const params = {};
  for (const [k, v] of new URLSearchParams(query)) params[k] = v;
  if (parts.length > 1) {
    try { params.id = decodeURIComponent(parts.slice(1).join("/")); }
    catch (e) { params.id = parts.slice(1).join("/"); }
  }
  return { page: parts[0] || "sessions", params };
}

export function hashFor(page, id, query) {
  let out = "#/" + page;
  if (id !== undefined && id !== null && id !== "") out += "/" + encodeURIComponent(String(id));
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query))
      if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
    const qs = q.toString();
    if (qs) out += "?" + qs;
  }
  return out;
}

export const sessionHash = (id, query) => hashFor("session", id, query);
