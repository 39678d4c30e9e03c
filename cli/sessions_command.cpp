// `mibyan sessions list | show ID | search QUERY | delete ID [--json]`:
// reads (and, for delete, writes) the session store directly. LMDB allows
// several processes; this one holds no transaction longer than one call.
#include "cli/commands.hpp"

#include <ctime>
#include <iostream>

#include "config/options.hpp"
#include "base/json.hpp"
#include "storage/result_spill.hpp"
#include "cli/session_chain.hpp"
#include "storage/session_json.hpp"
#include "runtime/store_config.hpp"
#include "storage/prompt_store.hpp"
#include "storage/session_store.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr << "usage: mibyan sessions list [--limit N] [--json]\n"
               "       mibyan sessions show ID [--json | --prompt]\n"
               "       mibyan sessions search QUERY [--role R] [--session ID]"
               " [--limit N] [--json]\n"
               "       mibyan sessions delete ID\n";
}

std::string format_time(int64_t ms) {
  if (ms <= 0)
    return "-";
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string one_line(std::string s, size_t max) {
  for (auto& c : s)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  if (s.size() > max)
    s = s.substr(0, max) + "...";
  return s;
}

// `sessions show --prompt ID`: the system prompt the session started with,
// byte for byte (docs/agent_loop.md, "The frozen system prompt").
int print_stored_prompt(session_store& store, const std::string& id) {
  auto prompts = open_prompt_store(store);
  if (!prompts) {
    std::cerr << "mibyan sessions: " << prompts.error << "\n";
    return 1;
  }
  auto hash = (*prompts)->hash_of(id);
  if (!hash) {
    std::cerr << "mibyan sessions: " << hash.error
              << (hash.code == status_code::not_found
                    ? " (it was started by an older version, or no turn "
                      "has run yet)"
                    : "")
              << "\n";
    return 1;
  }
  auto text = (*prompts)->get(*hash);
  if (!text) {
    std::cerr << "mibyan sessions: the stored system prompt of session "
              << id << " cannot be read: " << text.error << "\n";
    return 1;
  }
  std::cout << *text << std::flush;
  return 0;
}

} // namespace

int sessions_command(const std::vector<std::string>& args,
                     const global_flags& flags) {
  bool as_json = false;
  bool show_prompt = false;
  size_t limit = 20;
  std::string role, session_filter;
  std::vector<std::string> pos;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--json") {
      as_json = true;
    } else if (a == "--prompt") {
      show_prompt = true;
    } else if ((a == "--limit" || a == "--role" || a == "--session")
               && i + 1 < args.size()) {
      const auto& v = args[++i];
      if (a == "--limit") {
        char* end = nullptr;
        auto n = std::strtoul(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || n == 0 || n > 100000) {
          std::cerr << "mibyan sessions: --limit takes a number from 1 to "
                       "100000\n";
          return 2;
        }
        limit = n;
      } else {
        (a == "--role" ? role : session_filter) = v;
      }
    } else if (a.rfind("--", 0) == 0) {
      std::cerr << "mibyan sessions: unknown option " << a << "\n";
      usage();
      return 2;
    } else {
      pos.push_back(a);
    }
  }
  if (pos.empty()) {
    usage();
    return 2;
  }
  const auto& verb = pos[0];
  if (show_prompt && (verb != "show" || as_json)) {
    std::cerr << "mibyan sessions: --prompt goes with show, without --json\n";
    return 2;
  }
  bool needs_arg = verb == "show" || verb == "search" || verb == "delete";
  if ((verb != "list" && !needs_arg) || (needs_arg && pos.size() != 2)
      || (verb == "list" && pos.size() != 1)) {
    usage();
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  auto configured = store_options_from(opts);
  if (!configured) {
    std::cerr << "mibyan sessions: " << configured.error << "\n";
    return 2;
  }
  session_store_options so = std::move(*configured);
  so.read_only = verb != "delete";
  auto opened = open_session_store(so);
  if (!opened && opened.code == status_code::config_invalid) {
    std::cerr << "mibyan sessions: " << opened.error << "\n";
    return 2;
  }
  // Read-only, not_found means no store yet (or one another process is
  // still creating): nothing has been recorded. A damaged store is
  // reported (docs/storage.md).
  if (!opened && so.read_only && opened.code == status_code::not_found) {
    if (verb == "list") {
      std::cout << (as_json ? "[]\n" : "no sessions yet\n");
      return 0;
    }
    if (verb == "search") {
      if (as_json)
        std::cout << search_results_json(search_results{}).pretty() << "\n";
      else
        std::cout << "0 matches\n";
      return 0;
    }
    std::cerr << "mibyan sessions: no sessions recorded yet (" << so.dir
              << ")\n";
    return 1;
  }
  if (!opened) {
    std::cerr << "mibyan sessions: " << opened.error << "\n";
    return 1;
  }
  auto& store = **opened;
  if (verb == "list") {
    auto list = store.list_sessions(limit, 0);
    if (!list) {
      std::cerr << "mibyan sessions: " << list.error << "\n";
      return 1;
    }
    if (as_json) {
      json::value out = json::value::make_array();
      for (auto& s : *list)
        out.push_back(session_json(s));
      std::cout << out.pretty() << "\n";
    } else if (list->empty()) {
      std::cout << "no sessions yet\n";
    } else {
      for (auto& s : *list)
        std::cout << s.id << "  " << format_time(s.started_at_ms) << "  "
                  << s.message_count << " msgs  "
                  << one_line(s.title.empty() ? s.model : s.title, 60)
                  << "\n";
    }
    return 0;
  }
  const auto& arg = pos[1];
  if (verb == "show") {
    auto info = store.get_session(arg);
    if (!info) {
      std::cerr << "mibyan sessions: " << info.error << "\n";
      return 1;
    }
    if (show_prompt)
      return print_stored_prompt(store, arg);
    auto msgs = store.load_messages(arg);
    if (!msgs) {
      std::cerr << "mibyan sessions: " << msgs.error << "\n";
      return 1;
    }
    if (as_json) {
      auto out = session_json(*info);
      json::value list = json::value::make_array();
      for (auto& m : *msgs)
        list.push_back(message_json(m));
      out["messages"] = std::move(list);
      auto chain = session_chain_json(read_session_chain(store, *info));
      out["chain"] = std::move(chain["chain"]);
      out["children"] = std::move(chain["children"]);
      std::cout << out.pretty() << "\n";
      return 0;
    }
    std::cout << "session " << info->id << " (" << info->message_count
              << " messages, model " << info->model << ")\n";    std::cout << render_session_chain(read_session_chain(store, *info));

    for (auto& m : *msgs) {
      std::cout << "[" << m.message.role;
      if (!m.message.tool_name.empty())
        std::cout << " " << m.message.tool_name;
      std::cout << "] " << m.message.content << "\n";
      for (auto& c : m.message.tool_calls)
        std::cout << "  -> " << c.name << " " << one_line(c.arguments, 200)
                  << "\n";
    }
    return 0;
  }
  if (verb == "search") {
    search_request req;
    req.query = arg;
    req.limit = limit;
    req.session_id = session_filter;
    if (!role.empty())
      req.roles.push_back(role);
    auto found = store.search(req);
    if (!found) {
      std::cerr << "mibyan sessions: " << found.error << "\n";
      return 1;
    }
    if (as_json) {
      auto out = search_results_json(*found);
      std::cout << out.pretty() << "\n";
    } else {
      std::cout << found->total << " matches\n";
      for (auto& h : found->hits)
        std::cout << h.session_id << " #" << h.message_id << " [" << h.role
                  << "] " << one_line(h.snippet, 160) << "\n";
    }
    return 0;
  }
  // delete. With the prompt store open, the delete drops the session's
  // stored system prompt in its own transaction (storage/prompt_store.hpp).
  auto prompts = open_prompt_store(store);
  if (!prompts)
    std::cerr << "mibyan sessions: warning: " << prompts.error
              << " (the session's stored prompt is collected later)\n";
  if (auto st = store.delete_session(arg); !st) {
    std::cerr << "mibyan sessions: " << st.error << "\n";
    return 1;
  }
  // The session's spilled tool results go with it (docs/security.md).
  if (auto st = remove_spilled_results(opts.home, arg); !st) {
    std::cerr << "mibyan sessions: deleted session " << arg << ", but "
              << st.error << "\n";
    return 1;
  }
  std::cout << "deleted session " << arg << "\n";
  return 0;
}

} // namespace mibyan::cli
