#include "cli/terminal_output.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/json.hpp"
#include "base/log.hpp"
#include "config/options.hpp"

namespace mibyan::cli {

namespace fs = std::filesystem;

std::string route_logs_to_file(const global_flags& flags, const options& o,
                               const std::string& name) {
  if (!flags.log_level.empty() || std::getenv("MIBYAN_LOG_LEVEL") != nullptr)
    return {};
  auto dir = fs::path(o.home) / "logs";
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  auto file = (dir / (name + ".log")).string();
  // A --log-file / logging.file already set stays the file; the terminal
  // only loses the lines.
  if (flags.log_file.empty() && o.logging.file.empty()
      && !log::log_to_file(file))
    return {};
  log::set_stderr_enabled(false);
  return flags.log_file.empty() && o.logging.file.empty()
           ? file
           : (flags.log_file.empty() ? o.logging.file : flags.log_file);
}

namespace {

std::string first_line(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return {};
  auto e = s.find('\n', b);
  auto line = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (e != std::string::npos && s.find_first_not_of(" \t\r\n", e) != std::string::npos)
    line += " ...";
  return line;
}

std::string cut(std::string s, size_t max_chars) {
  if (s.size() <= max_chars)
    return s;
  size_t n = max_chars > 3 ? max_chars - 3 : max_chars;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n; // never inside a UTF-8 sequence
  return s.substr(0, n) + "...";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), s < 10 ? "%.1fs" : "%.0fs", s);
  return buf;
}

} // namespace

std::string short_arguments(const std::string& tool,
                            const std::string& arguments_json,
                            size_t max_chars) {
  auto parsed = json::parse(arguments_json);
  if (!parsed || !parsed.v->is_object())
    return cut(first_line(arguments_json), max_chars);
  auto& a = *parsed.v;
  if (tool == "delegate_task") {
    if (auto t = a.find("tasks"); t != nullptr && t->is_array()
                                  && t->size() > 0)
      return std::to_string(t->size()) + " task"
             + (t->size() == 1 ? "" : "s");
  }
  for (auto key : {"command", "code", "path", "goal", "query", "url",
                   "pattern", "action"}) {
    auto v = a.find(key);
    if (v != nullptr && v->is_string() && !v->as_string().empty())
      return cut(first_line(v->as_string()), max_chars);
  }
  if (auto urls = a.find("urls"); urls != nullptr && urls->is_array()
                                  && urls->size() > 0
                                  && urls->as_array()[0].is_string())
    return cut(urls->as_array()[0].as_string(), max_chars);
  return cut(a.dump(), max_chars);
}

bool result_is_error(const std::string& result_json) {
  auto parsed = json::parse(result_json);
  if (!parsed || !parsed.v->is_object())
    return false;
  auto& r = *parsed.v;
  if (auto e = r.find("error"); e != nullptr && !e->is_null()
                                && !(e->is_string() && e->as_string().empty()))
    return true;
  if (auto x = r.find("exit_code"); x != nullptr && x->is_number()
                                    && x->as_int() != 0)
    return true;
  if (auto rs = r.find("results"); rs != nullptr && rs->is_array())
    for (auto& e : rs->as_array())
      if (e.is_object() && e.get_string("status", "ok") != "ok")
        return true;
  return false;
}

tool_activity::tool_activity(std::ostream& out, std::mutex& mtx)
  : out_(out), mtx_(mtx) {
  ticker_ = std::thread([this] { tick(); });
}

tool_activity::~tool_activity() {
  {
    std::lock_guard<std::mutex> guard{tick_mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  ticker_.join();
}

void tool_activity::clear_status_locked() {
  if (!status_shown_)
    return;
  out_ << "\r\033[K" << std::flush;
  status_shown_ = false;
}

void tool_activity::set_paused(bool paused) {
  std::lock_guard<std::mutex> guard{mtx_};
  paused_ = paused;
  if (paused)
    clear_status_locked();
}

void tool_activity::draw_status_locked() {
  if (running_.empty() || paused_) {
    clear_status_locked();
    return;
  }
  static const char* const frames[] = {"|", "/", "-", "\\"};
  auto i = running_.find(last_started_);
  if (i == running_.end())
    i = running_.begin();
  auto& c = i->second;
  auto secs = std::chrono::duration<double>(
                std::chrono::steady_clock::now() - c.start)
                .count();
  std::string line(2 + 2 * static_cast<size_t>(c.depth), ' ');
  line += frames[frame_++ % 4];
  line += " " + c.name + " " + seconds_text(secs);
  if (running_.size() > 1)
    line += " (+" + std::to_string(running_.size() - 1) + " more)";
  out_ << "\r\033[K" << line << std::flush;
  status_shown_ = true;
}

void tool_activity::on_event(const tool_event& e) {
  const auto& id = e.call_id;
  const auto& name = e.tool;
  int depth = e.depth;
  std::string indent(2 + 2 * static_cast<size_t>(depth), ' ');
  std::lock_guard<std::mutex> guard{mtx_};
  clear_status_locked();
  if (e.what == tool_event::phase::start) {
    running_[id] = running_call{name, depth, std::chrono::steady_clock::now()};
    last_started_ = id;
    auto args = short_arguments(name, e.args_json);
    out_ << indent << "> " << name << (args.empty() ? "" : "  ") << args
         << "\n";
  } else {
    double secs = static_cast<double>(e.duration_us) / 1e6;
    if (auto i = running_.find(id); i != running_.end()) {
      if (secs <= 0)
        secs = std::chrono::duration<double>(
                 std::chrono::steady_clock::now() - i->second.start)
                 .count();
      running_.erase(i);
    }
    bool error = result_is_error(e.result_json);
    out_ << indent << (error ? "x " : "ok ") << name << " "
         << seconds_text(secs) << (error ? "  (error)" : "") << "\n";
  }
  draw_status_locked();
  out_ << std::flush;
}

void tool_activity::end_turn() {
  std::lock_guard<std::mutex> guard{mtx_};
  running_.clear();
  clear_status_locked();
}

void tool_activity::tick() {
  std::unique_lock<std::mutex> lock{tick_mtx_};
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds{250});
    if (stop_)
      break;
    std::lock_guard<std::mutex> guard{mtx_};
    if (!running_.empty())
      draw_status_locked();
  }
}

} // namespace mibyan::cli
