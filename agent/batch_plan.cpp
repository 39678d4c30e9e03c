// File: agent/batch_plan.cpp
#include "agent/batch_plan.hpp"

#include <utility>

#include "base/json.hpp"
#include "tools/file_io.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

// A path a call claims for the duration of a parallel run.
struct reservation {
  std::string path;
  bool writer;
};

// How one call takes part in segmentation.
struct call_class {
  enum { barrier, parallel } kind = barrier;
  std::vector<reservation> paths;
};

call_class classify(const tool_call& call, const batch_plan_options& opts) {
  call_class out;
  if (call.name == "clarify")
    return out;
  auto parsed = json::parse(call.arguments);
  if (!parsed || !parsed.v->is_object())
    return out;
  auto& args = *parsed.v;
  auto resolve = [&](std::string_view p) {
    return opts.resolve ? opts.resolve(p) : resolve_path(p, opts.cwd);
  };
  auto path_arg = [&](std::string& out_path) {
    auto* p = args.find("path");
    if (p == nullptr || !p->is_string()
        || strings::trim_view(p->as_string(), " \t\r").empty())
      return false;
    out_path = resolve(p->as_string());
    return true;
  };
  std::string path;
  if (call.name == "read_file" || call.name == "write_file") {
    if (!path_arg(path))
      return out;
    out.paths.push_back({path, call.name == "write_file"});
  } else if (call.name == "search_files") {
    if (!path_arg(path))
      path = resolve(".");
    out.paths.push_back({path, false});
  } else if (call.name == "patch") {
    auto* text = args.find("patch");
    if (args.get_string("mode", "replace") == "patch") {
      if (text == nullptr || !text->is_string())
        return out;
      for (auto& p : v4a_patch_paths(text->as_string()))
        out.paths.push_back({resolve(p), true});
      if (out.paths.empty())
        return out;
    } else {
      if (!path_arg(path))
        return out;
      out.paths.push_back({path, true});
    }
  } else {
    bool safe = opts.parallel_safe ? opts.parallel_safe(call.name)
                                   : default_parallel_safe(call.name);
    if (!safe)
      return out;
  }
  out.kind = call_class::parallel;
  return out;
}

bool conflicts(const std::vector<reservation>& held,
               const std::vector<reservation>& wanted) {
  for (auto& w : wanted)
    for (auto& h : held)
      if ((w.writer || h.writer) && paths_overlap(w.path, h.path))
        return true;
  return false;
}

} // namespace

bool default_parallel_safe(std::string_view name) {
  for (std::string_view safe :
       {"read_file", "search_files", "session_search", "skill_view",
        "skills_list", "vision_analyze", "web_extract", "web_search"})
    if (name == safe)
      return true;
  return false;
}

bool paths_overlap(std::string_view a, std::string_view b) {
  if (a.size() > b.size())
    std::swap(a, b);
  if (b.compare(0, a.size(), a) != 0)
    return false;
  if (a.size() == b.size())
    return true;
  // `a` is a proper prefix of `b`: an ancestor when the next character of
  // `b` starts a component ("/" itself is everyone's ancestor).
  return (!a.empty() && a.back() == '/') || b[a.size()] == '/';
}

std::vector<std::string> v4a_patch_paths(std::string_view patch) {
  std::vector<std::string> out;
  auto add = [&](std::string_view p) {
    p = strings::trim_view(p, " \t\r");
    if (!p.empty())
      out.emplace_back(p);
  };
  size_t pos = 0;
  while (pos <= patch.size()) {
    auto end = patch.find('\n', pos);
    if (end == std::string_view::npos)
      end = patch.size();
    auto line = strings::trim_view(patch.substr(pos, end - pos), " \t\r");
    pos = end + 1;
    for (std::string_view head : {"*** Update File:", "*** Add File:",
                                  "*** Delete File:", "*** Move to:"}) {
      if (line.substr(0, head.size()) == head) {
        add(line.substr(head.size()));
        break;
      }
    }
    std::string_view move = "*** Move File:";
    if (line.substr(0, move.size()) == move) {
      auto rest = line.substr(move.size());
      auto arrow = rest.find("->");
      if (arrow == std::string_view::npos) {
        add(rest);
      } else {
        add(rest.substr(0, arrow));
        add(rest.substr(arrow + 2));
      }
    }
    if (end == patch.size())
      break;
  }
  return out;
}

std::vector<batch_segment> plan_batch(const std::vector<tool_call>& calls,
                                      const batch_plan_options& opts) {
  std::vector<batch_segment> raw;
  if (calls.empty())
    return raw;
  if (calls.size() == 1) {
    raw.push_back({{0}, false});
    return raw;
  }
  batch_segment run{{}, true};
  std::vector<reservation> held;
  auto close_run = [&] {
    if (!run.calls.empty())
      raw.push_back(std::move(run));
    run = batch_segment{{}, true};
    held.clear();
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    auto cls = classify(calls[i], opts);
    if (cls.kind == call_class::barrier) {
      close_run();
      raw.push_back({{i}, false});
      continue;
    }
    if (conflicts(held, cls.paths))
      close_run();
    run.calls.push_back(i);
    for (auto& r : cls.paths)
      held.push_back(std::move(r));
  }
  close_run();
  // Demote short runs, merge neighbouring sequential segments.
  std::vector<batch_segment> out;
  for (auto& seg : raw) {
    if (seg.calls.size() < 2)
      seg.parallel = false;
    if (!seg.parallel && !out.empty() && !out.back().parallel) {
      auto& prev = out.back().calls;
      prev.insert(prev.end(), seg.calls.begin(), seg.calls.end());
      continue;
    }
    out.push_back(std::move(seg));
  }
  return out;
}

} // namespace mibyan
