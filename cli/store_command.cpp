// `mibyan store migrate [--url URL]` and
// `mibyan store copy --from lmdb:PATH|postgres:URL --to lmdb:PATH|postgres:URL`
// (docs/storage.md, "PostgreSQL"). Passwords come from the environment
// (PGPASSWORD, or the variable storage.postgres.password_env names), never
// from the command line: a URL with a password is refused.
#include "cli/commands.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "config/options.hpp"
#include "runtime/store_config.hpp"
#include "storage/postgres/pg_connection.hpp"
#include "storage/postgres/pg_session_store.hpp"
#include "storage/postgres/store_copy.hpp"
#include "storage/session_store.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr
    << "usage: mibyan store migrate [--url URL]\n"
       "       mibyan store copy --from lmdb:PATH|postgres:URL"
       " --to lmdb:PATH|postgres:URL\n"
       "The password comes from PGPASSWORD (or MIBYAN_PG_PASSWORD), never "
       "from the URL.\n";
}

// The password for a PostgreSQL URL: MIBYAN_PG_PASSWORD from the
// environment or the home's .env (as the configured store gets it); ""
// leaves it to libpq (PGPASSWORD, ~/.pgpass).
std::string pg_password(const options* cfg) {
  if (cfg != nullptr)
    return cfg->secret("MIBYAN_PG_PASSWORD");
  const char* v = std::getenv("MIBYAN_PG_PASSWORD");
  return v ? v : "";
}

// "" when `url` may be used on the command line, else why not.
std::string check_cli_url(const std::string& url) {
  if (url.empty())
    return "the PostgreSQL URL is empty";
  if (pg::url_has_password(url))
    return "the URL carries a password; put it in PGPASSWORD or "
           "MIBYAN_PG_PASSWORD instead (a command line is visible to every "
           "user of the machine)";
  return {};
}

struct endpoint {
  std::string kind;  // "lmdb" or "postgres"
  std::string where;
};

bool parse_endpoint(const std::string& s, endpoint& out, std::string& why) {
  auto colon = s.find(':');
  if (colon == std::string::npos) {
    why = "'" + s + "' is not lmdb:PATH or postgres:URL";
    return false;
  }
  out.kind = s.substr(0, colon);
  out.where = s.substr(colon + 1);
  if (out.kind != "lmdb" && out.kind != "postgres") {
    why = "unknown backend '" + out.kind + "' (use lmdb:PATH or "
          "postgres:URL)";
    return false;
  }
  if (out.where.empty()) {
    why = "'" + s + "' names no path or URL";
    return false;
  }
  if (out.kind == "postgres")
    why = check_cli_url(out.where);
  return why.empty();
}

int migrate(const std::vector<std::string>& args, const global_flags& flags) {
  std::string url;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--url" && i + 1 < args.size()) {
      url = args[++i];
    } else {
      usage();
      return 2;
    }
  }
  options cfg;
  bool have_cfg = load_config_or_report(flags, cfg);
  std::string password;
  if (url.empty() && have_cfg) {
    // The configured store (storage.postgres.url, ${VAR}s expanded).
    auto so = store_options_from(cfg);
    if (so && so->backend == "postgres") {
      url = so->postgres_url;
      password = so->postgres_password;
    }
  }
  if (url.empty()) {
    std::cerr << "mibyan store migrate: no PostgreSQL URL (--url URL, or "
                 "storage.backend: postgres with storage.postgres.url)\n";
    return 2;
  }
  if (password.empty())
    if (auto why = check_cli_url(url); !why.empty()) {
      std::cerr << "mibyan store migrate: " << why << "\n";
      return 2;
    }
  pg_store_options o;
  o.url = url;
  o.password = !password.empty() ? password
                                 : pg_password(have_cfg ? &cfg : nullptr);
  o.on_migrate = [](int from, int to) {
    std::cerr << "mibyan store migrate: schema " << from << " -> " << to
              << "\n";
  };
  auto r = pg_session_store::migrate(o);
  if (!r) {
    std::cerr << "mibyan store migrate: " << r.error << "\n";
    return r.code == status_code::unavailable
               || r.code == status_code::config_invalid
               || r.code == status_code::permission_denied
               || r.code == status_code::not_found
             ? 2
             : 1;
  }
  if (r->first == r->second)
    std::cout << "schema is current (version " << r->second << ")\n";
  else
    std::cout << "migrated schema version " << r->first << " to "
              << r->second << "\n";
  return 0;
}

// Opens one side of a copy: the source read-only, the destination
// read-write (a PostgreSQL destination gets its schema created or
// migrated).
store_result<std::unique_ptr<session_store>>
open_endpoint(const endpoint& e, bool destination, const options* cfg) {
  session_store_options so;
  so.backend = e.kind;
  so.read_only = !destination;
  if (e.kind == "lmdb") {
    so.dir = e.where;
  } else {
    so.postgres_url = e.where;
    so.postgres_password = pg_password(cfg);
    so.auto_migrate = destination;
  }
  return open_session_store(so);
}

int copy(const std::vector<std::string>& args, const global_flags& flags) {
  std::string from, to;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--from" && i + 1 < args.size())
      from = args[++i];
    else if (args[i] == "--to" && i + 1 < args.size())
      to = args[++i];
    else {
      usage();
      return 2;
    }
  }
  if (from.empty() || to.empty()) {
    usage();
    return 2;
  }
  endpoint src, dst;
  std::string why;
  if (!parse_endpoint(from, src, why) || !parse_endpoint(to, dst, why)) {
    std::cerr << "mibyan store copy: " << why << "\n";
    return 2;
  }
  if (src.kind == dst.kind && src.where == dst.where) {
    std::cerr << "mibyan store copy: --from and --to are the same store\n";
    return 2;
  }
  options cfg;
  bool have_cfg = load_config_or_report(flags, cfg);
  auto a = open_endpoint(src, false, have_cfg ? &cfg : nullptr);
  if (!a) {
    std::cerr << "mibyan store copy: source " << from << ": " << a.error
              << "\n";
    return 2;
  }
  auto b = open_endpoint(dst, true, have_cfg ? &cfg : nullptr);
  if (!b) {
    std::cerr << "mibyan store copy: destination " << to << ": " << b.error
              << "\n";
    return 2;
  }
  auto progress = [](const std::string& line) {
    std::cerr << "mibyan store copy: " << line << "\n";
  };
  // The side stores on both stores: prompts and kernel checkpoints. A
  // store that keeps none (an old read-only source) is skipped, said once.
  std::shared_ptr<session_store> sa = std::move(*a), sb = std::move(*b);
  store_copy_sides sides;
  auto pa = open_prompt_store(*sa);
  auto pb = open_prompt_store(*sb);
  if (pa && pb) {
    sides.src_prompts = pa->get();
    sides.dst_prompts = pb->get();
  } else {
    progress("warning: system prompts not copied: "
             + (pa ? pb.error : pa.error));
  }
  auto ca = open_checkpoint_store(sa);
  auto cb = open_checkpoint_store(sb);
  if (ca && cb) {
    sides.src_checkpoints = ca->get();
    sides.dst_checkpoints = cb->get();
  } else {
    progress("warning: kernel checkpoints not copied: "
             + (ca ? cb.error : ca.error));
  }
  auto ua = open_user_state_store(*sa);
  auto ub = open_user_state_store(*sb);
  if (ua && ub) {
    sides.src_user_state = ua->get();
    sides.dst_user_state = ub->get();
  } else {
    progress("warning: per-user state (memory, skills, allowlist) not "
             "copied: "
             + (ua ? ub.error : ua.error));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = copy_store(*sa, *sb, progress, sides);
  double secs = std::chrono::duration<double>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  if (!r) {
    std::cerr << "mibyan store copy: " << r.error
              << " (running the same command again resumes)\n";
    return 1;
  }
  auto& rep = *r;
  for (auto& w : rep.warnings)
    std::cerr << "mibyan store copy: warning: " << w << "\n";
  for (auto& id : rep.only_in_destination)
    std::cout << "only in the destination (not in the source): " << id
              << "\n";
  for (auto& c : rep.conflicts)
    std::cout << "conflict, not copied: " << c << "\n";
  char t[32];
  std::snprintf(t, sizeof t, "%.1f", secs);
  std::cout << "copied " << rep.sessions_seen << " sessions ("
            << rep.sessions_created << " new, " << rep.sessions_resumed
            << " completed, " << rep.sessions_unchanged << " unchanged, "
            << rep.conflicts.size() << " in conflict), "
            << rep.messages_copied << " messages, " << rep.jobs_copied
            << " jobs, " << rep.runs_copied << " runs, "
            << rep.responses_copied << " responses, " << rep.prompts_copied
            << " prompts, " << rep.checkpoints_copied << " checkpoints, "
            << rep.user_docs_copied << " user state documents in "
            << t << " s\n";
  return rep.conflicts.empty() ? 0 : 1;
}

} // namespace

bool check_store_at_startup(const options& opts, const std::string& me) {
  auto so = store_options_from(opts);
  if (!so) {
    std::cerr << me << ": configuration error: " << so.error << "\n";
    return false;
  }
  if (so->backend == "lmdb")
    return true;  // the embedded store: a failure there is reported later
  auto opened = open_session_store(*so);
  if (!opened) {
    std::cerr << me << ": storage." << so->backend << ": " << opened.error
              << "\n";
    return false;
  }
  return true;
}

int store_command(const std::vector<std::string>& args,
                  const global_flags& flags) {
  if (args.empty()) {
    usage();
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "migrate")
    return migrate(rest, flags);
  if (args[0] == "copy")
    return copy(rest, flags);
  usage();
  return 2;
}

} // namespace mibyan::cli
