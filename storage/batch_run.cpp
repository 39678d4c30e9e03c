#include "storage/batch_run.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errno_status.hpp"
#include "base/private_file.hpp"

namespace mibyan::batch {

namespace {

std::string string_member(const json::value& v, std::string_view key) {
  auto m = v.find(key);
  return m != nullptr && m->is_string() ? m->as_string() : std::string{};
}

int64_t int_member(const json::value& v, std::string_view key) {
  auto m = v.find(key);
  return m != nullptr && m->is_number() ? m->as_int() : 0;
}

std::string fnv1a_hex(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(h));
  return buf;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string{"."}
                                    : path.substr(0, slash == 0 ? 1 : slash);
}

bool read_whole(const std::string& path, std::string& out) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return !in.bad();
}

// "123.json" -> 123; false for anything else.
bool sample_index(const char* name, uint64_t& out) {
  const char* p = name;
  if (*p < '0' || *p > '9')
    return false;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (UINT64_MAX - 9) / 10)
      return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  if (std::strcmp(p, ".json") != 0)
    return false;
  out = v;
  return true;
}

double percentile(std::vector<int64_t> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto pos = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return static_cast<double>(v[std::min(pos, v.size() - 1)]);
}

} // namespace

prompt_file parse_prompts(std::string_view text) {
  prompt_file out;
  out.hash = fnv1a_hex(text);
  uint64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto line = text.substr(pos, nl == std::string_view::npos
                                   ? std::string_view::npos
                                   : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos)
      continue;
    auto bad = [&](const std::string& why) {
      out.bad_lines.push_back("line " + std::to_string(line_no) + ": "
                              + why);
    };
    auto parsed = json::parse(line);
    if (!parsed) {
      bad("not valid JSON (" + parsed.error + ")");
      continue;
    }
    if (!parsed.v->is_object()) {
      bad(std::string{"expected a JSON object, got "}
          + json::kind_name(parsed.v->type()));
      continue;
    }
    auto p = parsed.v->find("prompt");
    if (p == nullptr) {
      bad("no \"prompt\" member");
      continue;
    }
    if (!p->is_string()) {
      bad(std::string{"\"prompt\" must be a string, got "}
          + json::kind_name(p->type()));
      continue;
    }
    if (p->as_string().find_first_not_of(" \t\r\n") == std::string::npos) {
      bad("\"prompt\" is empty");
      continue;
    }
    prompt_entry e;
    e.index = line_no - 1;
    e.prompt = p->as_string();
    for (auto& [k, v] : parsed.v->as_object())
      if (k != "prompt")
        e.metadata.set(k, v);
    out.prompts.push_back(std::move(e));
  }
  return out;
}

result<prompt_file> load_prompts(const std::string& path) {
  std::string text;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    return errno_status(errno, "cannot read " + path);
  if (!S_ISREG(st.st_mode))
    return status::failure(status_code::invalid_argument,
                           path + " is not a regular file");
  if (!read_whole(path, text))
    return status::failure(status_code::unavailable, "cannot read " + path);
  return parse_prompts(text);
}

bool tool_result_failed(std::string_view content) {
  auto parsed = json::parse(content);
  if (parsed && parsed.v->is_object()) {
    auto failed_obj = [](const json::value& o) {
      auto err = o.find("error");
      if (err != nullptr && !err->is_null())
        return true;
      auto ok = o.find("success");
      return ok != nullptr && ok->is_bool() && !ok->as_bool();
    };
    if (failed_obj(*parsed.v))
      return true;
    auto inner = parsed.v->find("content");
    return inner != nullptr && inner->is_object() && failed_obj(*inner);
  }
  if (parsed)
    return false;
  auto b = content.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos)
    return true;
  auto rest = content.substr(b);
  if (rest.size() < 6)
    return false;
  std::string head{rest.substr(0, 6)};
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return head == "error:";
}

json::value make_sample(const prompt_entry& p, const std::string& run_name,
                        const turn_result& result,
                        const std::string& exit_reason,
                        json::value conversations, int64_t duration_ms) {
  json::value out = json::value::make_object();
  out["prompt_index"] = static_cast<int64_t>(p.index);
  out["conversations"] = std::move(conversations);
  json::value meta = p.metadata.is_object() ? p.metadata
                                            : json::value::make_object();
  meta["run_name"] = run_name;
  meta["timestamp"] = utc_now();
  meta["model"] = result.provider.model;
  out["metadata"] = std::move(meta);
  out["completed"] = result.completed;
  out["partial"] = result.partial;
  out["api_calls"] = result.api_calls;

  // Tool calls by name, their results' success, and arguments that were
  // not a JSON object.
  std::map<std::string, tool_counts> stats;
  std::map<std::string, std::string> call_names;
  std::set<std::string> names;
  int64_t turns = 0;
  int64_t bad_arguments = 0;
  for (auto& m : result.messages) {
    if (m.role == "assistant") {
      ++turns;
      for (auto& c : m.tool_calls) {
        call_names[c.id] = c.name;
        names.insert(c.name);
        ++stats[c.name].count;
        // The model's argument text (not the turn's result).
        auto parsed = json::parse(c.arguments.empty() ? std::string{"{}"}
                                                      : c.arguments);
        if (!parsed || !parsed.v->is_object())
          ++bad_arguments;
      }
    } else if (m.role == "tool") {
      auto it = call_names.find(m.tool_call_id);
      auto name = it != call_names.end() ? it->second : m.tool_name;
      auto& s = stats[name];
      if (tool_result_failed(m.content))
        ++s.failure;
      else
        ++s.success;
    }
  }
  out["turns"] = turns;
  json::value ts = json::value::make_object();
  for (auto& [name, c] : stats) {
    json::value e = json::value::make_object();
    e["count"] = c.count;
    e["success"] = c.success;
    e["failure"] = c.failure;
    ts[name] = std::move(e);
  }
  out["tool_stats"] = std::move(ts);
  json::value tn = json::value::make_array();
  for (auto& n : names)
    tn.push_back(n);
  out["tool_names"] = std::move(tn);
  out["bad_arguments"] = bad_arguments;
  json::value tokens = json::value::make_object();
  const auto& u = result.usage;
  auto prompt_tokens = u.input_tokens + u.cache_read_tokens
                       + u.cache_write_tokens;
  tokens["input"] = u.input_tokens;
  tokens["output"] = u.output_tokens;
  tokens["total"] = prompt_tokens + u.output_tokens;
  out["tokens"] = std::move(tokens);
  out["duration_ms"] = duration_ms;
  out["exit_reason"] = exit_reason;
  return out;
}

std::string run_paths::sample_file(uint64_t index) const {
  return samples_dir() + "/" + std::to_string(index) + ".json";
}

result<std::string> run_dir(const std::string& home,
                            const std::string& name) {
  auto fail = [](const std::string& why) {
    return result<std::string>::failure(status_code::invalid_argument, why);
  };
  if (name.empty())
    return fail("the run name is empty");
  if (name.size() > 128)
    return fail("the run name is longer than 128 characters");
  if (name[0] == '.')
    return fail("the run name must not start with '.'");
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'
          || c == '-'))
      return fail("the run name '" + name
                  + "' may only contain letters, digits, '.', '_' and '-'");
  if (home.empty())
    return result<std::string>::failure(status_code::config_invalid,
                                        "no state directory ($MIBYAN_HOME)");
  return home + "/batch/" + name;
}

status write_atomic(const std::string& path, const std::string& data) {
  auto tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return errno_status(errno, "cannot create " + tmp);
  status err;
  if (write_all(fd, data) != 0)
    err = errno_status(errno, "cannot write " + tmp);
  else if (::fsync(fd) != 0)
    err = errno_status(errno, "cannot sync " + tmp);
  if (::close(fd) != 0 && err.ok())
    err = errno_status(errno, "cannot write " + tmp);
  if (err.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    err = errno_status(errno, "cannot rename " + tmp);
  if (!err.ok()) {
    ::unlink(tmp.c_str());
    return err;
  }
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

status write_sample(const run_paths& rp, uint64_t index,
                    const std::string& sample_json) {
  return write_atomic(rp.sample_file(index), sample_json);
}

std::set<uint64_t> completed_samples(const run_paths& rp) {
  std::set<uint64_t> out;
  auto dir = rp.samples_dir();
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (auto* e = ::readdir(d)) {
    uint64_t idx = 0;
    if (sample_index(e->d_name, idx))
      out.insert(idx);
    else if (std::strstr(e->d_name, ".json.tmp.") != nullptr)
      ::unlink((dir + "/" + e->d_name).c_str());
  }
  ::closedir(d);
  return out;
}

status append_error(const run_paths& rp, uint64_t index,
                    const std::string& kind, const std::string& text) {
  json::value rec = json::value::make_object();
  rec["prompt_index"] = static_cast<int64_t>(index);
  rec["kind"] = kind;
  rec["error"] = text;
  rec["timestamp"] = utc_now();
  auto line = rec.dump() + "\n";
  auto path = rp.errors_file();
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                  0600);
  if (fd < 0)
    return errno_status(errno, "cannot open " + path);
  status err;
  if (write_all(fd, line) != 0)
    err = errno_status(errno, "cannot write " + path);
  ::fdatasync(fd);
  ::close(fd);
  return err;
}

result<merge_result> merge_run(const run_paths& rp,
                               const std::string& run_name,
                               const std::set<std::string>& known_tools,
                               int64_t total_prompts,
                               int64_t bad_prompt_lines,
                               double wall_seconds) {
  merge_result r;
  auto done = completed_samples(rp);
  std::string out;
  std::map<std::string, tool_counts> tools;
  std::vector<int64_t> durations;
  int64_t turns = 0, api_calls = 0, completed = 0, partial = 0;
  int64_t tok_in = 0, tok_out = 0, tok_total = 0;
  for (auto idx : done) {
    ++r.samples;
    std::string text;
    if (!read_whole(rp.sample_file(idx), text)) {
      ++r.invalid_json;
      continue;
    }
    auto parsed = json::parse(text);
    if (!parsed || !parsed.v->is_object()
        || !parsed.v->find("conversations")
        || !(*parsed.v)["conversations"].is_array()
        || int_member(*parsed.v, "bad_arguments") > 0) {
      ++r.invalid_json;
      continue;
    }
    auto& s = *parsed.v;
    bool unknown = false;
    if (auto names = s.find("tool_names"); names && names->is_array())
      for (auto& n : names->as_array())
        if (!n.is_string() || known_tools.count(n.as_string()) == 0)
          unknown = true;
    if (unknown) {
      ++r.invalid_tool_name;
      continue;
    }
    out += s.dump();
    out += '\n';
    ++r.written;
    turns += int_member(s, "turns");
    api_calls += int_member(s, "api_calls");
    completed += s.get_bool("completed", false) ? 1 : 0;
    partial += s.get_bool("partial", false) ? 1 : 0;
    durations.push_back(int_member(s, "duration_ms"));
    if (auto t = s.find("tokens"); t && t->is_object()) {
      tok_in += int_member(*t, "input");
      tok_out += int_member(*t, "output");
      tok_total += int_member(*t, "total");
    }
    if (auto ts = s.find("tool_stats"); ts && ts->is_object())
      for (auto& [name, c] : ts->as_object()) {
        auto& acc = tools[name];
        acc.count += int_member(c, "count");
        acc.success += int_member(c, "success");
        acc.failure += int_member(c, "failure");
      }
  }
  if (auto written = write_atomic(rp.trajectories_file(), out);
      !written.ok())
    return written;

  std::map<std::string, int64_t> errors;
  int64_t error_total = 0;
  std::string etext;
  if (read_whole(rp.errors_file(), etext)) {
    std::istringstream in{etext};
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty())
        continue;
      auto e = json::parse(line);
      ++errors[e && e.v->is_object() ? string_member(*e.v, "kind")
                                     : std::string{"unreadable"}];
      ++error_total;
    }
  }

  auto& st = r.stats;
  st["run_name"] = run_name;
  st["total_prompts"] = total_prompts;
  st["samples"] = r.samples;
  st["written"] = r.written;
  st["completed"] = completed;
  st["partial"] = partial;
  st["missing"] = std::max<int64_t>(0, total_prompts - r.samples);
  json::value filtered = json::value::make_object();
  filtered["invalid_json"] = r.invalid_json;
  filtered["invalid_tool_name"] = r.invalid_tool_name;
  st["filtered"] = std::move(filtered);
  st["bad_prompt_lines"] = bad_prompt_lines;
  json::value ej = json::value::make_object();
  ej["total"] = error_total;
  json::value by_kind = json::value::make_object();
  for (auto& [k, n] : errors)
    by_kind[k] = n;
  ej["by_kind"] = std::move(by_kind);
  st["errors"] = std::move(ej);
  st["turns"] = turns;
  st["api_calls"] = api_calls;
  json::value tj = json::value::make_object();
  int64_t calls = 0;
  for (auto& [name, c] : tools) {
    json::value e = json::value::make_object();
    e["count"] = c.count;
    e["success"] = c.success;
    e["failure"] = c.failure;
    tj[name] = std::move(e);
    calls += c.count;
  }
  st["tool_calls"] = calls;
  st["tool_calls_by_name"] = std::move(tj);
  json::value tok = json::value::make_object();
  tok["input"] = tok_in;
  tok["output"] = tok_out;
  tok["total"] = tok_total;
  st["tokens"] = std::move(tok);
  json::value dur = json::value::make_object();
  int64_t sum = 0, mx = 0;
  for (auto d : durations) {
    sum += d;
    mx = std::max(mx, d);
  }
  dur["total_ms"] = sum;
  dur["mean_ms"] = durations.empty()
                     ? 0.0
                     : static_cast<double>(sum)
                         / static_cast<double>(durations.size());
  dur["p50_ms"] = percentile(durations, 0.5);
  dur["p95_ms"] = percentile(durations, 0.95);
  dur["max_ms"] = mx;
  st["durations"] = std::move(dur);
  st["wall_seconds"] = wall_seconds;
  st["completed_at"] = utc_now();
  if (auto written = write_atomic(rp.stats_file(), st.pretty() + "\n");
      !written.ok())
    return written;
  return r;
}

std::string summary_table(const json::value& st) {
  std::ostringstream o;
  auto row = [&o](const std::string& k, const std::string& v) {
    o << "  " << k;
    for (size_t i = k.size(); i < 26; ++i)
      o << ' ';
    o << v << "\n";
  };
  auto num = [&st](std::string_view k) {
    return std::to_string(int_member(st, k));
  };
  o << "batch " << string_member(st, "run_name") << "\n";
  row("prompts", num("total_prompts"));
  row("samples (done)", num("samples"));
  row("written", num("written"));
  row("completed / partial", num("completed") + " / " + num("partial"));
  if (auto f = st.find("filtered"); f && f->is_object())
    row("filtered json / tool",
        std::to_string(int_member(*f, "invalid_json")) + " / "
          + std::to_string(int_member(*f, "invalid_tool_name")));
  row("bad prompt lines", num("bad_prompt_lines"));
  if (auto e = st.find("errors"); e && e->is_object()) {
    std::string kinds;
    if (auto bk = e->find("by_kind"); bk && bk->is_object())
      for (auto& [k, n] : bk->as_object())
        kinds += (kinds.empty() ? " (" : ", ") + k + " "
                 + std::to_string(n.as_int());
    row("errors", std::to_string(int_member(*e, "total"))
                    + (kinds.empty() ? "" : kinds + ")"));
  }
  row("turns", num("turns"));
  row("api calls", num("api_calls"));
  row("tool calls", num("tool_calls"));
  if (auto t = st.find("tool_calls_by_name"); t && t->is_object())
    for (auto& [name, c] : t->as_object())
      row("  " + name, std::to_string(int_member(c, "count")) + " ("
                         + std::to_string(int_member(c, "failure"))
                         + " failed)");
  if (auto t = st.find("tokens"); t && t->is_object())
    row("tokens in / out",
        std::to_string(int_member(*t, "input")) + " / "
          + std::to_string(int_member(*t, "output")));
  if (auto d = st.find("durations"); d && d->is_object()) {
    char buf[96];
    auto dbl = [&d](std::string_view k) {
      auto m = d->find(k);
      return m && m->is_number() ? m->as_double() : 0.0;
    };
    std::snprintf(buf, sizeof buf, "%.0f / %.0f / %.0f ms", dbl("p50_ms"),
                  dbl("p95_ms"), dbl("max_ms"));
    row("turn p50 / p95 / max", buf);
  }
  if (auto w = st.find("wall_seconds"); w && w->is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", w->as_double());
    row("wall time", buf);
  }
  return o.str();
}

} // namespace mibyan::batch
