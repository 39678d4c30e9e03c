#include "kernels/cell_result.hpp"

#include <regex>

#include "base/redact.hpp"
#include "base/output_cap.hpp"
#include "base/redact_json.hpp"

namespace mibyan {

namespace {

// Keeps 40 % head and 60 % tail of `text` when it is over `cap` bytes.
std::string cap_text(const std::string& text, uint64_t total, uint64_t cap,
                     bool& truncated, uint64_t& omitted) {
  truncated = false;
  omitted = 0;
  if (text.size() <= cap && total <= text.size())
    return text;
  truncated = true;
  auto head_len = static_cast<size_t>(cap * 4 / 10);
  auto tail_len = static_cast<size_t>(cap - head_len);
  if (text.size() <= cap) {
    head_len = text.size();
    tail_len = 0;
  }
  omitted = total > head_len + tail_len ? total - head_len - tail_len : 0;
  return render_head_tail(std::string_view{text}.substr(0, head_len),
                          std::string_view{text}.substr(text.size() - tail_len),
                          omitted, total, "bytes");
}

const char* status_name(cell_status s) {
  switch (s) {
    case cell_status::success: return "success";
    case cell_status::error: return "error";
    case cell_status::timeout: return "timeout";
    case cell_status::interrupted: return "interrupted";
  }
  return "error";
}

} // namespace

std::string traceback_hint(const std::string& traceback,
                           const std::string& allowed_tools) {
  auto tb = traceback.substr(0, 4000);
  static const std::regex cannot_import(
    R"(cannot import name '([A-Za-z_][A-Za-z0-9_]*)' from 'mibyan_tools')");
  static const std::regex name_error(
    R"(NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined)");
  static const std::regex no_module(
    R"(ModuleNotFoundError: No module named '([^']+)')");
  auto is_helper = [](const std::string& x) {
    return x == "json_parse" || x == "shell_quote" || x == "retry";
  };
  std::smatch m;
  if (std::regex_search(tb, m, cannot_import)) {
    auto x = m[1].str();
    if (is_helper(x))
      return "Import helpers with `from mibyan_tools import " + x
             + "`. If that import failed, the generated module may be stale "
               "or another mibyan_tools may be first on sys.path. Check "
               "mibyan_tools.__file__ and retry with reset=true.";
    return "'" + x + "' is not available inside execute_code. Importable "
           "tools here: " + allowed_tools + ". For anything else, use the "
           "normal tool call instead of execute_code.";
  }
  if (std::regex_search(tb, m, name_error) && is_helper(m[1].str()))
    return "Import " + m[1].str() + " before calling it: from mibyan_tools "
           "import " + m[1].str();
  if (std::regex_search(tb, m, no_module))
    return "'" + m[1].str() + "' is not installed in the execute_code "
           "interpreter. Use Python stdlib inside execute_code, or run the "
           "code via terminal() with the project venv's python instead.";
  if (tb.find("string indices must be integers") != std::string::npos
      || tb.find("'str' object has no attribute 'get'") != std::string::npos)
    return "Tool functions in execute_code return DICTS (already parsed) — "
           "do not json.loads() them or index them like strings. Example: "
           "read_file(path)['content'].";
  if (tb.find("MemoryError") != std::string::npos)
    return "The kernel's memory is limited (code_execution.max_memory_mb, "
           "an address-space limit). Process the data in smaller pieces "
           "or stream it; the kernel and its state are still usable.";
  return {};
}

json::value build_cell_result(const cell_outcome& c, const cell_limits& lim,
                              const spill_writer& spill) {
  const auto& redact = lim.redact ? *lim.redact : process_redactor();
  auto out_clean = strip_ansi(c.stdout_text);
  auto total = std::max<uint64_t>(c.stdout_total, c.stdout_text.size());
  // ANSI stripping shortens the text; keep the byte counts honest.
  if (out_clean.size() < c.stdout_text.size())
    total -= std::min<uint64_t>(total, c.stdout_text.size() - out_clean.size());
  // Secrets go before capping, so neither the inline text nor the spill
  // file carries them (docs/security.md).
  {
    auto before = out_clean.size();
    if (redact.redact(out_clean)) {
      total += out_clean.size();
      total -= std::min<uint64_t>(total, before);
    }
  }
  bool out_truncated = false;
  uint64_t out_omitted = 0;
  auto out_inline = cap_text(out_clean, total, lim.max_stdout_bytes,
                             out_truncated, out_omitted);
  std::string spill_path;
  bool spill_failed = false;
  if (out_truncated && spill) {
    auto text = out_clean;
    if (text.size() > lim.max_spill_bytes) {
      text.resize(static_cast<size_t>(lim.max_spill_bytes));
      text += "\n[mibyan: output capped at "
              + std::to_string(lim.max_spill_bytes) + " bytes]\n";
    }
    spill_path = spill(text);
    spill_failed = spill_path.empty();
  }

  // stderr and traceback share one cap.
  auto err_all = strip_ansi(c.stderr_text);
  redact.redact(err_all);
  auto err_total = std::max<uint64_t>(c.stderr_total, c.stderr_text.size());
  if (!c.traceback.empty()) {
    if (!err_all.empty() && err_all.back() != '\n')
      err_all += '\n';
    auto tb = strip_ansi(c.traceback);
    redact.redact(tb);
    // The runner may already have printed the traceback to stderr.
    if (err_all.find(tb) == std::string::npos) {
      err_all += tb;
      err_total += tb.size();
    }
  }
  bool err_truncated = false;
  uint64_t err_omitted = 0;
  auto err_inline = cap_text(err_all, std::max<uint64_t>(err_total,
                                                         err_all.size()),
                             lim.max_stderr_bytes, err_truncated,
                             err_omitted);

  std::string output = out_inline;
  bool show_stderr = !err_inline.empty()
                     && c.status != cell_status::interrupted;
  if (show_stderr) {
    if (!output.empty() && output.back() != '\n')
      output += '\n';
    output += "--- stderr ---\n" + err_inline;
  }
  if (c.status == cell_status::timeout && !c.error.empty())
    output += output.empty() ? "⏰ " + c.error : "\n\n⏰ " + c.error;
  if (c.status == cell_status::interrupted)
    output += "\n[execution interrupted"
              + (c.interrupt_reason.empty() ? std::string{}
                                            : " — " + c.interrupt_reason)
              + "]";

  json::value r;
  r["status"] = status_name(c.status);
  r["output"] = output;
  r["exit_code"] = c.exit_code;
  r["tool_calls_made"] = c.tool_calls;
  r["duration_seconds"]
    = static_cast<double>(static_cast<int64_t>(c.duration_seconds * 1000))
      / 1000.0;
  json::value kernel;
  kernel["mode"] = c.mode;
  kernel["reused"] = c.reused;
  kernel["execution_count"] = c.execution_count;
  std::string restore_line;
  if (c.restore != nullptr) {
    auto& rs = *c.restore;
    if (rs.restored) {
      kernel["state_reset"] = false;
      kernel["state_restored"] = true;
      kernel["checkpoint_age_cells"] = rs.age_cells;
      json::value lost{json::array{}};
      std::string lost_names;
      for (auto& v : rs.not_restored) {
        json::value e;
        e["name"] = v.name;
        e["type"] = v.type;
        e["reason"] = v.reason;
        lost.push_back(std::move(e));
        if (lost_names.size() < 300)
          lost_names += (lost_names.empty() ? "" : ", ") + v.name + " ("
                        + v.type + ")";
      }
      kernel["not_restored"] = std::move(lost);
      restore_line = "Kernel state restored from a checkpoint"
                     + (rs.age_cells > 0
                          ? " " + std::to_string(rs.age_cells)
                              + " cell(s) old"
                          : std::string{})
                     + ": " + std::to_string(rs.names) + " name(s) back"
                     + (lost_names.empty()
                          ? "."
                          : "; not restored: " + lost_names
                              + " (see kernel.not_restored).");
    } else {
      kernel["state_reset"] = true;
      kernel["state_restored"] = false;
      restore_line = "This session's kernel checkpoint was not restored ("
                     + rs.refused + "); the kernel started fresh.";
    }
  } else {
    kernel["state_reset"] = c.state_reset;
  }
  if (c.ended)
    kernel["ended"] = true;
  if (c.checkpoint_wait_ms > 0)
    kernel["checkpoint_wait_ms"]
      = static_cast<double>(static_cast<int64_t>(c.checkpoint_wait_ms * 1000))
        / 1000.0;
  r["kernel"] = std::move(kernel);
  r["stdout_truncated"] = out_truncated;
  r["stdout_bytes_captured"]
    = static_cast<int64_t>(out_truncated ? total - out_omitted : total);
  r["stdout_bytes_total"] = static_cast<int64_t>(total);
  r["stdout_bytes_omitted"] = static_cast<int64_t>(out_omitted);
  r["stderr_truncated"] = err_truncated;
  r["stderr_bytes_total"] = static_cast<int64_t>(
    std::max<uint64_t>(err_total, err_all.size()));
  if (out_truncated) {
    if (!spill_path.empty()) {
      r["warning"] = "execute_code stdout was truncated (head/tail shown); "
                     "the script did run. FULL output saved to " + spill_path
                     + " — page it with read_file(path=\"" + spill_path
                     + "\", offset=...) instead of re-running.";
      r["stdout_spill_path"] = spill_path;
    } else if (spill_failed || !spill) {
      r["warning"] = "execute_code stdout was truncated; the script did run, "
                     "but only the captured head/tail output is included. "
                     "Re-run only with narrower output if the omitted data "
                     "is required.";
    }
  }
  if (!c.error.empty())
    r["error"] = c.error;
  else if (c.status == cell_status::error && !c.traceback.empty()) {
    auto tb = c.traceback;
    auto last = tb.find_last_not_of("\n ");
    auto line_start = tb.rfind('\n', last == std::string::npos ? 0 : last);
    r["error"] = line_start == std::string::npos
                   ? tb.substr(0, 2000)
                   : tb.substr(line_start + 1, 2000);
  }
  if (c.status == cell_status::error && !c.traceback.empty()) {
    std::string allowed;
    for (auto& t : c.tools)
      allowed += (allowed.empty() ? "" : ", ") + t;
    if (auto hint = traceback_hint(c.traceback, allowed); !hint.empty())
      r["hint"] = hint;
  }
  if (!c.note.empty() || !restore_line.empty())
    r["note"] = restore_line.empty() ? c.note
                : c.note.empty()     ? restore_line
                                     : restore_line + " " + c.note;
  redact_json_strings(r, redact);
  return r;
}

} // namespace mibyan
