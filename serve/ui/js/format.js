// Formatting of numbers, times, durations and sizes for display. Pure
// functions of their arguments (strings out, no DOM).

const intFmt = new Intl.NumberFormat("en-US");

export function int(n) {
  if (n === null || n === undefined || n === "" || !Number.isFinite(Number(n))) return "–";
  return intFmt.format(Math.round(Number(n)));
}

// 1234 -> "1.2k", 2500000 -> "2.5M".
export function compact(n) {
  const v = Number(n);
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1).replace(/\.0$/, "") + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
  if (a >= 1e3) return (v / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
  return String(Math.round(v));
}

// cost_usd is null when the provider did not report prices.
export function usd(v) {
  if (v === null || v === undefined || !Number.isFinite(Number(v))) return "–";
  const n = Number(v);
  if (n === 0) return "$0";
  if (n < 0.01) return "$" + n.toFixed(4);
  return "$" + n.toFixed(2);
}

function pad(n) { return String(n).padStart(2, "0"); }

// Local date and time, "2026-12-06 03:04:05".
export function datetime(ms) {
  if (!ms || !Number.isFinite(Number(ms))) return "–";
  const d = new Date(Number(ms));
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " "
    + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

export function time(ms) {
  if (!ms || !Number.isFinite(Number(ms))) return "";
  const d = new Date(Number(ms));
  return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

// Seconds -> "3d 4h", "2h 5m", "4m 10s", "12s".
export function duration(s) {
  const v = Math.max(0, Math.floor(Number(s) || 0));
  const d = Math.floor(v / 86400), hr = Math.floor((v % 86400) / 3600);
  const m = Math.floor((v % 3600) / 60), sec = v % 60;
  if (d) return d + "d " + hr + "h";
  if (hr) return hr + "h " + m + "m";
  if (m) return m + "m " + sec + "s";
  return sec + "s";
}

export function micros(us) {
  const v = Number(us);
  if (!Number.isFinite(v)) return "";
  if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + " s";
  if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + " ms";
  return Math.round(v) + " µs";
}

export function bytes(n) {
  const v = Number(n);
  if (!Number.isFinite(v) || v < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, x = v;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (i === 0 ? String(Math.round(x)) : x.toFixed(x >= 100 ? 0 : 1)) + " " + units[i];
}

// "In 42s" / "3m ago" relative to now.
export function relative(ms, now = Date.now()) {
  if (!ms) return "";
  const diff = Math.round((Number(ms) - now) / 1000);
  return diff >= 0 ? "in " + duration(diff) : duration(-diff) + " ago";
}

// Pretty JSON when `text` parses, else `text` unchanged.
export function prettyJson(text) {
  if (typeof text !== "string") {
    try { return JSON.stringify(text, null, 2); } catch (e) { return String(text); }
  }
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
}

// Message content as plain text: a string, or an array of parts
// ({type:"text", text}) as the OpenAI format allows.
export function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((p) => (p && typeof p === "object")
      ? (typeof p.text === "string" ? p.text : "[" + (p.type || "part") + "]")
      : String(p)).join("\n");
  return prettyJson(content);
}
