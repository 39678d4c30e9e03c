#include "kernels/stub_generator.hpp"

#include <algorithm>

namespace mibyan {

namespace {

struct script_tool {
  const char* name;
  std::vector<stub_parameter> params;
  const char* doc;
};

// The §3 table of docs/kernel_protocol.md, sorted by name. Every parameter
// is forwarded by name, including None defaults (the dispatcher treats an
// explicit null as "use the default").
const std::vector<script_tool>& tool_table() {
  static const std::vector<script_tool> table{
    {"patch",
     {{"path", "", "None"},
      {"old_string", "", "None"},
      {"new_string", "", "None"},
      {"replace_all", "", "False"},
      {"mode", "", "\"replace\""},
      {"patch", "", "None"},
      {"cross_profile", "", "False"}},
     "Edits a file: replace old_string with new_string (mode=\"replace\")\n"
     "    or apply a V4A patch (mode=\"patch\"). Returns the patch result."},
    {"read_file",
     {{"path", "str", ""},
      {"offset", "int", "1"},
      {"limit", "int", "2000"}},
     "Reads a text file; offset is a 1-indexed line. Returns\n"
     "    {\"content\", \"total_lines\", ...}."},
    {"search_files",
     {{"pattern", "str", ""},
      {"target", "str", "\"content\""},
      {"path", "str", "\".\""},
      {"file_glob", "str", "None"},
      {"limit", "int", "50"},
      {"offset", "int", "0"},
      {"output_mode", "str", "\"content\""},
      {"context", "int", "0"},
      {"order", "str", "\"discovery\""}},
     "Searches file contents (target=\"content\", regex) or names\n"
     "    (target=\"files\", glob). Returns {\"matches\": [...],"
     " \"total_count\", ...}."},
    {"terminal",
     {{"command", "str", ""},
      {"timeout", "int", "None"},
      {"workdir", "str", "None"}},
     "Runs a shell command in the foreground. Returns\n"
     "    {\"output\": str, \"exit_code\": int, ...}."},
    {"web_extract",
     {{"urls", "list", ""},
      {"char_limit", "int", "None"}},
     "Fetches pages as markdown. Returns {\"results\": [{\"url\", \"title\","
     "\n    \"content\", \"error\"}, ...]}."},
    {"web_search",
     {{"query", "str", ""},
      {"limit", "int", "5"}},
     "Searches the web. Returns {\"data\": {\"web\": [{\"url\", \"title\","
     "\n    \"description\"}, ...]}}."},
    {"write_file",
     {{"path", "str", ""},
      {"content", "str", ""},
      {"cross_profile", "bool", "False"}},
     "Writes (always overwrites) a whole file. Returns the write result."},
  };
  return table;
}

const script_tool* find_tool(const std::string& name) {
  for (auto& t : tool_table())
    if (name == t.name)
      return &t;
  return nullptr;
}

// Everything before the tool list: module docstring and imports.
constexpr const char* stub_prologue = R"py(
# mibyan_tools: call Mibyan agent tools from an execute_code script.
#
# Generated for one kernel by the Mibyan host; do not edit. Each tool
# function sends one request over the kernel's Unix socket and returns the
# tool's result as a dict. Tool errors come back as {"error": "..."};
# transport failures raise ConnectionError (or TimeoutError).
"""Mibyan tools for execute_code scripts.

Import what you need explicitly, e.g.::

    from mibyan_tools import read_file, json_parse

AVAILABLE_TOOLS lists the tools this kernel may call.
"""

import json as _json
import os as _os
import shlex as _shlex
import socket as _socket
import threading as _threading
import time as _time

)py";

// Transport and helpers; independent of the tool set.
constexpr const char* stub_transport = R"py(
HELPERS = ("json_parse", "shell_quote", "retry")
__all__ = list(AVAILABLE_TOOLS) + list(HELPERS)

_ENV_SOCKET = "MIBYAN_RPC_SOCKET"
_ENV_TOKEN = "MIBYAN_RPC_TOKEN"
_ENV_TIMEOUT = "MIBYAN_RPC_TIMEOUT"
_DEFAULT_TIMEOUT = 300.0
_LOST = ("mibyan_tools: connection lost after '%s' was sent; outcome "
         "unknown \u2014 check the effect before retrying.")


# -- helpers ----------------------------------------------------------------

def json_parse(text):
    """Parses JSON text leniently: strips a UTF-8 BOM and allows control
    characters inside strings. Accepts str or UTF-8 bytes."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return _json.loads(text, strict=False)


def shell_quote(s):
    """Quotes a string for a POSIX shell (as shlex.quote)."""
    return _shlex.quote(s)


def retry(fn, max_attempts=3, delay=2):
    """Calls fn() until it returns without raising, at most max_attempts
    times, sleeping delay * 2**attempt seconds after each failure. Re-raises
    the last error."""
    attempts = max(1, int(max_attempts))
    for attempt in range(attempts):
        try:
            return fn()
        except Exception:
            if attempt + 1 >= attempts:
                raise
            _time.sleep(delay * (2 ** attempt))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        "'%s' is not available inside execute_code. Importable tools here: "
        "%s. For anything else, use the normal tool call instead of "
        "execute_code." % (name, ", ".join(AVAILABLE_TOOLS) or "none"))


# -- transport --------------------------------------------------------------

class _Waiter(object):
    __slots__ = ("event", "reply", "lost")

    def __init__(self):
        self.event = _threading.Event()
        self.reply = None
        self.lost = False


class _Connection(object):
    """One Unix-socket connection, owned by one process. Any thread may
    send; a reader thread routes each reply line to the waiter registered
    under its id."""

    def __init__(self, path):
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.pid = _os.getpid()
        self.lock = _threading.Lock()
        self.send_lock = _threading.Lock()
        self.waiters = {}
        self.dead = False
        reader = _threading.Thread(target=self._read_loop,
                                   name="mibyan-tools-reader")
        reader.daemon = True
        reader.start()

    def _read_loop(self):
        buf = bytearray()
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                start = 0
                while True:
                    nl = buf.find(b"\n", start)
                    if nl < 0:
                        break
                    self._route(bytes(buf[start:nl]))
                    start = nl + 1
                if start:
                    del buf[:start]
        except (OSError, ValueError):
            pass
        finally:
            self._fail_all()

    def _route(self, line):
        try:
            msg = _json.loads(line.decode("utf-8"))
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        rid = msg.get("id")
        if not isinstance(rid, str):
            return
        with self.lock:
            waiter = self.waiters.pop(rid, None)
        if waiter is not None:
            waiter.reply = msg
            waiter.event.set()

    def _fail_all(self):
        with self.lock:
            self.dead = True
            waiters = list(self.waiters.values())
            self.waiters.clear()
        for waiter in waiters:
            waiter.lost = True
            waiter.event.set()
        try:
            self.sock.close()
        except OSError:
            pass

    def register(self, rid):
        waiter = _Waiter()
        with self.lock:
            if self.dead:
                return None
            self.waiters[rid] = waiter
        return waiter

    def unregister(self, rid):
        with self.lock:
            self.waiters.pop(rid, None)

    def send(self, data):
        with self.send_lock:
            self.sock.sendall(data)

    def close(self):
        """Shuts the connection down; waiters still registered are woken
        as lost by the reader thread."""
        with self.lock:
            self.dead = True
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass

    def abandon(self):
        """Drops a connection inherited through fork() without disturbing
        the parent's use of it."""
        try:
            self.sock.close()
        except OSError:
            pass


_state_lock = _threading.Lock()
_conn = None
_seq = 0


def _after_fork():
    global _state_lock, _conn
    _state_lock = _threading.Lock()
    if _conn is not None and _conn.pid != _os.getpid():
        _conn.abandon()
        _conn = None


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork)


def _next_id():
    global _seq
    with _state_lock:
        _seq += 1
        return "%d-%d" % (_os.getpid(), _seq)


def _connection():
    global _conn
    with _state_lock:
        conn = _conn
        if conn is not None and conn.pid != _os.getpid():
            conn.abandon()
            conn = _conn = None
        if conn is not None and conn.dead:
            conn = _conn = None
        if conn is None:
            conn = _Connection(_os.environ.get(_ENV_SOCKET, ""))
            _conn = conn
        return conn


def _reply_timeout():
    try:
        value = float(_os.environ.get(_ENV_TIMEOUT, ""))
    except ValueError:
        return _DEFAULT_TIMEOUT
    if not (0 < value < 1e9):
        return _DEFAULT_TIMEOUT
    return value


def _parse_result(text):
    try:
        value = json_parse(text)
    except ValueError:
        return text
    if isinstance(value, str):
        try:
            value = json_parse(value)
        except ValueError:
            pass
    return value


def _decode(msg):
    if "result" not in msg:
        error = msg.get("error")
        if isinstance(error, str):
            return {"error": error}
        return {"error": "mibyan_tools: the host replied without a result"}
    result = msg["result"]
    if isinstance(result, (str, bytes, bytearray)):
        return _parse_result(result)
    return result


def _call(tool, args):
    rid = _next_id()
    try:
        line = _json.dumps({"id": rid, "tool": tool, "args": args,
                            "token": _os.environ.get(_ENV_TOKEN, "")},
                           allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError("mibyan_tools: the arguments of '%s' cannot be sent "
                        "as JSON: %s" % (tool, e))
    data = (line + "\n").encode("utf-8")
    if not _os.environ.get(_ENV_SOCKET):
        raise ConnectionError(
            "mibyan_tools: %s is not set; tools can only be called from "
            "code run by execute_code. '%s' was not sent." % (_ENV_SOCKET,
                                                            tool))
    timeout = _reply_timeout()
    problem = None
    # Reconnect only before send: a line that was not fully written is
    # discarded by the host, so it is safe to send it again once. A line
    # that was written is never sent again.
    for _attempt in range(2):
        try:
            conn = _connection()
        except OSError as e:
            problem = e
            continue
        waiter = conn.register(rid)
        if waiter is None:
            problem = "connection closed"
            continue
        try:
            conn.send(data)
        except OSError as e:
            conn.unregister(rid)
            conn.close()
            problem = e
            continue
        if not waiter.event.wait(timeout):
            conn.unregister(rid)
            if waiter.reply is None:
                raise TimeoutError(
                    "mibyan_tools: no reply to '%s' within %gs; outcome "
                    "unknown \u2014 check the effect before retrying."
                    % (tool, timeout))
        if waiter.reply is None:
            raise ConnectionError(_LOST % tool)
        return _decode(waiter.reply)
    raise ConnectionError("mibyan_tools: cannot reach the Mibyan host (%s); "
                          "'%s' was not sent." % (problem, tool))


# -- tools ------------------------------------------------------------------
)py";

std::string render_function(const script_tool& t) {
  std::string sig = "def ";
  sig += t.name;
  sig += '(';
  std::string args = "{";
  bool first = true;
  for (auto& p : t.params) {
    if (!first) {
      sig += ", ";
      args += ", ";
    }
    first = false;
    sig += p.name;
    if (!p.annotation.empty())
      sig += ": " + p.annotation;
    if (!p.default_literal.empty())
      sig += p.annotation.empty() ? "=" + p.default_literal
                                  : " = " + p.default_literal;
    args += "\"" + p.name + "\": " + p.name;
  }
  sig += "):\n";
  args += "}";
  std::string out = "\n\n" + sig;
  out += "    \"\"\"";
  out += t.doc;
  out += "\"\"\"\n";
  out += "    return _call(\"";
  out += t.name;
  out += "\", " + args + ")\n";
  return out;
}

} // namespace

const std::vector<std::string>& script_tool_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> xs;
    for (auto& t : tool_table())
      xs.emplace_back(t.name);
    std::sort(xs.begin(), xs.end());
    return xs;
  }();
  return names;
}

bool is_script_tool(const std::string& name) {
  return find_tool(name) != nullptr;
}

std::vector<std::string> effective_script_tools(
  const std::vector<std::string>& enabled) {
  std::vector<std::string> out;
  for (auto& name : enabled)
    if (is_script_tool(name))
      out.push_back(name);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const std::vector<stub_parameter>& stub_parameters(const std::string& tool) {
  static const std::vector<stub_parameter> none;
  auto t = find_tool(tool);
  return t != nullptr ? t->params : none;
}

std::string generate_stub(const std::vector<std::string>& tools) {
  auto names = effective_script_tools(tools);
  std::string out = stub_prologue;
  out += "AVAILABLE_TOOLS = (";
  for (auto& n : names)
    out += "\"" + n + "\", ";
  if (!names.empty())
    out.resize(out.size() - 1);
  out += ")\n";
  out += stub_transport;
  for (auto& n : names)
    out += render_function(*find_tool(n));
  return out;
}

} // namespace mibyan
