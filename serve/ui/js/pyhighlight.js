// A small Python tokenizer for highlighting execute_code scripts. It
// splits source text into tokens {type, text} whose texts concatenate back
// to the input exactly; highlight() turns them into <span class="tok-TYPE">
// elements holding text nodes (never HTML). Good enough for display, not a
// parser: it knows comments, strings (prefixes, triple quotes, f-strings as
// whole strings), numbers, keywords, builtins, decorators, def/class names
// and operators.

const KEYWORDS = new Set(("False None True and as assert async await break class continue def del "
  + "elif else except finally for from global if import in is lambda nonlocal not or pass raise "
  + "return try while with yield match case").split(" "));

const BUILTINS = new Set(("abs all any ascii bin bool bytearray bytes callable chr classmethod compile "
  + "complex delattr dict dir divmod enumerate eval exec filter float format frozenset getattr "
  + "globals hasattr hash help hex id input int isinstance issubclass iter len list locals map max "
  + "memoryview min next object oct open ord pow print property range repr reversed round set "
  + "setattr slice sorted staticmethod str sum super tuple type vars zip self cls "
  + "Exception ValueError TypeError KeyError IndexError RuntimeError OSError").split(" "));

const STRING_START = /(?:[rRbBuUfF]|[rR][bBfF]|[bBfF][rR])?('''|"""|'|")/y;
const NUMBER = /(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?[jJ]?)/y;
const IDENT = /[A-Za-z_\u00c0-\uffff][A-Za-z0-9_\u00c0-\uffff]*/y;
const OPERATOR = /(?:\*\*=?|\/\/=?|<<=?|>>=?|->|:=|[-+*/%&|^~<>!=]=?|[.,:;@])/y;
const DECORATOR = /@[A-Za-z_][\w.]*/y;
const WS = /[ \t\f\r\n]+/y;

// Returns [{type, text}], type in: comment string number keyword builtin
// def decorator operator punct name ws text.
export function tokenize(src) {
  const s = String(src ?? "");
  const out = [];
  let i = 0;
  let prevKeyword = "";
  const push = (type, text) => {
    if (!text) return;
    const last = out[out.length - 1];
    if (last && last.type === type && (type === "ws" || type === "text")) last.text += text;
    else out.push({ type, text });
  };
  while (i < s.length) {
    const c = s[i];
    let m;
    const at = (re) => { re.lastIndex = i; return re.exec(s); };
    if (c === "#") {
      const nl = s.indexOf("\n", i);
      const end = nl < 0 ? s.length : nl;
      push("comment", s.slice(i, end));
      i = end;
      continue;
    }
    if ((m = at(STRING_START))) {
      const quote = m[1];
      let j = i + m[0].length;
      const triple = quote.length === 3;
      for (;;) {
        if (j >= s.length) break;
        const ch = s[j];
        if (ch === "\\") { j += 2; continue; }     // in raw strings too: r"\"" goes on
        if (!triple && ch === "\n") break;           // unterminated: ends at the line
        if (s.startsWith(quote, j)) { j += quote.length; break; }
        j++;
      }
      j = Math.min(j, s.length);
      push("string", s.slice(i, j));
      i = j;
      prevKeyword = "";
      continue;
    }
    if (c === "@" && (i === 0 || /\n[ \t]*$/.test(s.slice(Math.max(0, i - 200), i)))) {
      const mm = at(DECORATOR);
      if (mm) { push("decorator", mm[0]); i += mm[0].length; continue; }
    }
    if ((m = at(WS))) { push("ws", m[0]); i += m[0].length; continue; }
    if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(s[i + 1] || ""))) {
      m = at(NUMBER);
      if (m && m[0]) { push("number", m[0]); i += m[0].length; prevKeyword = ""; continue; }
    }
    if ((m = at(IDENT))) {
      const w = m[0];
      let type = "name";
      if (prevKeyword === "def" || prevKeyword === "class") type = "def";
      else if (KEYWORDS.has(w)) type = "keyword";
      else if (BUILTINS.has(w)) type = "builtin";
      push(type, w);
      prevKeyword = type === "keyword" ? w : "";
      i += w.length;
      continue;
    }
    if ((m = at(OPERATOR))) { push("operator", m[0]); i += m[0].length; prevKeyword = ""; continue; }
    if ("()[]{}".includes(c)) { push("punct", c); i++; prevKeyword = ""; continue; }
    push("text", c);
    i++;
  }
  return out;
}

// A DocumentFragment of spans (class "tok-TYPE") with text nodes.
export function highlight(src) {
  const frag = document.createDocumentFragment();
  for (const t of tokenize(src)) {
    if (t.type === "ws" || t.type === "text" || t.type === "name" || t.type === "punct") {
      frag.appendChild(document.createTextNode(t.text));
    } else {
      const span = document.createElement("span");
      span.className = "tok-" + t.type;
      span.textContent = t.text;
      frag.appendChild(span);
    }
  }
  return frag;
}

// The tools a script calls: names imported from mibyan_tools
// (`from mibyan_tools import a, b as c`, `import mibyan_tools as t` then
// `t.a(...)`) and where they are called. Returns [{name, line}] in order.
export function scriptToolCalls(src) {
  const toks = tokenize(src).filter((t) => t.type !== "comment");
  const imported = new Map(); // local name -> tool name
  const modules = new Set();
  const sig = toks.filter((t) => t.type !== "ws" || t.text.includes("\n"));
  for (let k = 0; k < sig.length; k++) {
    const t = sig[k];
    if (t.type === "keyword" && t.text === "from" && sig[k + 1] && sig[k + 1].text === "mibyan_tools"
        && sig[k + 2] && sig[k + 2].text === "import") {
      let j = k + 3;
      let paren = false;
      if (sig[j] && sig[j].text === "(") { paren = true; j++; }
      while (j < sig.length) {
        const a = sig[j];
        if (a.type === "ws") { if (!paren) break; j++; continue; }
        if (a.text === ")") break;
        if (a.text === ",") { j++; continue; }
        if (a.type === "name" || a.type === "builtin" || a.type === "def") {
          let local = a.text;
          if (sig[j + 1] && sig[j + 1].text === "as" && sig[j + 2]) { local = sig[j + 2].text; j += 2; }
          imported.set(local, a.text);
          j++;
          continue;
        }
        if (a.text === "*") { imported.set("*", "*"); j++; continue; }
        break;
      }
    }
    if (t.type === "keyword" && t.text === "import" && sig[k + 1] && sig[k + 1].text === "mibyan_tools") {
      if (sig[k + 2] && sig[k + 2].text === "as" && sig[k + 3]) modules.add(sig[k + 3].text);
      else modules.add("mibyan_tools");
    }
  }
  const calls = [];
  const all = tokenize(src);
  const idx = [];           // indices of the tokens that are not whitespace
  const lineOf = [];        // 1-based line of each of those tokens
  let line = 1;
  for (let k = 0; k < all.length; k++) {
    if (all[k].type !== "ws" && all[k].type !== "comment") { idx.push(k); lineOf.push(line); }
    for (const ch of all[k].text) if (ch === "\n") line++;
  }
  for (let n = 0; n < idx.length; n++) {
    const t = all[idx[n]];
    const next = n + 1 < idx.length ? all[idx[n + 1]] : null;
    if (!((t.type === "name" || t.type === "builtin") && next && next.text === "(")) continue;
    const prev = n > 0 ? all[idx[n - 1]] : null;
    const prev2 = n > 1 ? all[idx[n - 2]] : null;
    if (prev && prev.text === ".") {
      if (prev2 && modules.has(prev2.text)) calls.push({ name: t.text, line: lineOf[n] });
    } else if (imported.has(t.text)) {
      calls.push({ name: imported.get(t.text), line: lineOf[n] });
    }
  }
  return calls;
}
