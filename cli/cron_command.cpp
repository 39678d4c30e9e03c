// `mibyan cron list|show ID|add ...|edit ID ...|pause ID|resume ID|run [ID]|
// remove ID|history ID [--json]` (docs/cron.md, "Using it"). The verbs go
// through cron_service (cron/cron_service.hpp): to the scheduler of the
// store when a process runs one (serve, a gateway, `mibyan cron run`), else
// to the store directly. `mibyan cron run` without an id is the foreground
// scheduler (cron_run_command); `run ID` with no scheduler anywhere starts
// one in this process for that run, waits for it and prints its outcome.
#include "cli/commands.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/json.hpp"
#include "config/options.hpp"
#include "cron/cron_service.hpp"
#include "runtime/cron_lease.hpp"
#include "runtime/cron_scheduler.hpp"
#include "runtime/runtime.hpp"
#include "runtime/store_config.hpp"
#include "storage/session_store.hpp"
#include "tools/agent/cron_jobs.hpp"

namespace mibyan::cli {

namespace {

namespace fs = std::filesystem;

void usage(std::ostream& out) {
  out << "usage: mibyan cron list [--json]\n"
         "       mibyan cron show ID [--json]\n"
         "       mibyan cron add --schedule S (--prompt TEXT | --script FILE)\n"
         "                       [--name N] [--tz ZONE] [--skill S]... [--cwd DIR]\n"
         "                       [--toolsets a,b] [--model M] [--provider P]\n"
         "                       [--deliver TARGET]... [--json]\n"
         "       mibyan cron edit ID [the flags of add] [--json]\n"
         "       mibyan cron pause ID [--reason TEXT] [--json]\n"
         "       mibyan cron resume ID [--json]\n"
         "       mibyan cron run ID [--json]   run the job now\n"
         "       mibyan cron run               run the scheduler in the foreground\n"
         "       mibyan cron remove ID [--json]\n"
         "       mibyan cron history ID [--limit N] [--offset N] [--json]\n"
         "  Schedules: 'in 30m', 'every 2h', '0 9 * * 1-5', '2026-12-24T09:00'.\n"
         "  Targets: session, file:PATH, webhook:URL, dashboard (docs/cron.md).\n";
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// The parsed command line.
struct cron_args {
  std::string verb;
  std::string id;
  bool as_json = false;
  // add / edit: the job members given, in the JSON form of cron/job.hpp.
  json::value def = json::value::make_object();
  std::string reason;
  int64_t limit = 20;
  int64_t offset = 0;
};

std::string absolute(const std::string& p) {
  if (p.empty() || p[0] == '/' || p[0] == '~')
    return p;
  std::error_code ec;
  auto cwd = fs::current_path(ec);
  return ec ? p : (cwd / p).lexically_normal().string();
}

bool parse_count(const std::string& flag, const std::string& v, int64_t min,
                 int64_t max, int64_t& out) {
  char* end = nullptr;
  auto n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < min || n > max) {
    std::cerr << "mibyan cron: " << flag << " takes a number from " << min
              << " to " << max << ", got '" << v << "'\n";
    return false;
  }
  out = n;
  return true;
}

// Returns 0 when parsed, else the exit code (2).
int parse(const std::vector<std::string>& args, cron_args& a) {
  std::vector<std::string> pos;
  json::value skills = json::value::make_array();
  json::value deliver = json::value::make_array();
  bool has_skills = false, has_deliver = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& f = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "mibyan cron: " << f << " needs a value\n";
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    if (f == "--json") {
      a.as_json = true;
    } else if (f == "-h" || f == "--help") {
      usage(std::cout);
      return -1;
    } else if (f == "--name" || f == "--schedule" || f == "--prompt"
               || f == "--model" || f == "--provider") {
      if (!value(v))
        return 2;
      a.def[f.substr(2)] = v;
    } else if (f == "--tz" || f == "--timezone") {
      if (!value(v))
        return 2;
      a.def["timezone"] = v;
    } else if (f == "--script") {
      if (!value(v))
        return 2;
      std::ifstream in{v, std::ios::binary};
      if (!in) {
        std::cerr << "mibyan cron: cannot read the script file '" << v
                  << "'\n";
        return 2;
      }
      std::ostringstream text;
      text << in.rdbuf();
      a.def["script"] = text.str();
    } else if (f == "--skill") {
      if (!value(v))
        return 2;
      skills.push_back(v);
      has_skills = true;
    } else if (f == "--cwd") {
      if (!value(v))
        return 2;
      a.def["cwd"] = absolute(v);
    } else if (f == "--toolsets") {
      if (!value(v))
        return 2;
      json::value list = json::value::make_array();
      for (auto& t : split_list(v))
        list.push_back(t);
      a.def["toolsets"] = std::move(list);
    } else if (f == "--deliver") {
      if (!value(v))
        return 2;
      deliver.push_back(v.rfind("file:", 0) == 0 ? "file:" + absolute(v.substr(5))
                                                 : v);
      has_deliver = true;
    } else if (f == "--reason") {
      if (!value(v))
        return 2;
      a.reason = v;
    } else if (f == "--limit" || f == "--offset") {
      if (!value(v))
        return 2;
      if (!parse_count(f, v, f == "--limit" ? 1 : 0, 100000,
                       f == "--limit" ? a.limit : a.offset))
        return 2;
    } else if (f.size() > 1 && f[0] == '-') {
      std::cerr << "mibyan cron: unknown option " << f << "\n";
      usage(std::cerr);
      return 2;
    } else {
      pos.push_back(f);
    }
  }
  if (has_skills)
    a.def["skills"] = std::move(skills);
  if (has_deliver)
    a.def["deliver"] = std::move(deliver);
  if (pos.empty()) {
    usage(std::cerr);
    return 2;
  }
  a.verb = pos[0];
  static const char* const with_id[] = {"show",   "edit",   "pause", "resume",
                                        "remove", "history"};
  bool needs_id = false;
  for (auto w : with_id)
    needs_id = needs_id || a.verb == w;
  bool known = needs_id || a.verb == "list" || a.verb == "add"
               || a.verb == "run";
  if (!known) {
    std::cerr << "mibyan cron: unknown command '" << a.verb << "'\n";
    usage(std::cerr);
    return 2;
  }
  size_t want = needs_id || (a.verb == "run" && pos.size() > 1) ? 2 : 1;
  if (pos.size() != want) {
    std::cerr << "mibyan cron " << a.verb << ": "
              << (want == 2 ? "expected one job ID" : "takes no arguments")
              << "\n";
    usage(std::cerr);
    return 2;
  }
  if (want == 2)
    a.id = pos[1];
  bool defines = !a.def.as_object().empty();
  if (defines && a.verb != "add" && a.verb != "edit") {
    std::cerr << "mibyan cron " << a.verb
              << ": the job flags belong to add and edit\n";
    return 2;
  }
  if (!a.id.empty())
    if (auto why = check_cron_job_id(a.id).error; !why.empty()) {
      std::cerr << "mibyan cron: malformed job id '" << a.id << "': " << why
                << "\n";
      return 2;
    }
  return 0;
}

// The exit code of a failed verb: 2 for a definition the user must fix,
// 1 otherwise (unknown id, store or scheduler trouble).
int report(const std::string& what, const status& st,
           const std::string& id = {}) {
  if (st.code == status_code::not_found && !id.empty())
    std::cerr << "mibyan cron " << what << ": no job '" << id
              << "' (see `mibyan cron list`)\n";
  else
    std::cerr << "mibyan cron " << what << ": " << st.error << "\n";
  return st.code == status_code::invalid_argument
             || st.code == status_code::permission_denied
             || st.code == status_code::already_exists
           ? 2
           : 1;
}

template <class T>
int report(const std::string& what, const result<T>& r,
           const std::string& id = {}) {
  return report(what, status::failure(r.code, r.error), id);
}

void print_job_text(const cron_job& j) {
  auto now = now_ms();
  auto sched = cron_job_schedule(j);
  std::cout << "job " << j.id << "  " << j.name << "\n"
            << "  schedule:  " << j.schedule << " ("
            << (sched ? sched->describe() : "invalid: " + sched.error)
            << "), zone " << j.timezone << "\n"
            << "  next run:  " << cron_next_run_text(j, now) << "\n"
            << "  last run:  "
            << (j.last_run_ms > 0 ? cron_local_time(j.last_run_ms, j.timezone)
                                      + " (" + cron_relative(j.last_run_ms, now)
                                      + "), " + j.last_status
                                  : std::string{"never"})
            << "\n";
  if (j.consecutive_failures > 0)
    std::cout << "  failures:  " << j.consecutive_failures << " in a row\n";
  std::string deliver;
  for (auto& d : j.deliver)
    deliver += (deliver.empty() ? "" : ", ") + d;
  std::cout << "  deliver:   " << (deliver.empty() ? "session" : deliver)
            << "\n";
  if (!j.cwd.empty())
    std::cout << "  cwd:       " << j.cwd << "\n";
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v)
      s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (!j.toolsets.empty())
    std::cout << "  toolsets:  " << join(j.toolsets) << "\n";
  if (!j.skills.empty())
    std::cout << "  skills:    " << join(j.skills) << "\n";
  if (!j.model.empty() || !j.provider.empty())
    std::cout << "  model:     " << j.provider
              << (j.provider.empty() || j.model.empty() ? "" : " / ")
              << j.model << "\n";
  std::cout << "  created:   by " << j.created_by
            << (j.created_by_session.empty() ? ""
                                             : " in session "
                                                 + j.created_by_session)
            << ", " << cron_local_time(j.created_ms, j.timezone) << "\n";
  if (!j.script.empty())
    std::cout << "  script:\n" << j.script
              << (j.script.back() == '\n' ? "" : "\n");
  else
    std::cout << "  prompt:    " << j.prompt << "\n";
}

std::string one_line(std::string s, size_t max) {
  for (auto& c : s)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  if (s.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
      --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

void print_run_text(const cron_run& r, const std::string& zone) {
  std::cout << r.id << "  " << cron_local_time(r.started_ms, zone) << "  "
            << r.status << "  " << r.trigger;
  if (r.ended_ms > 0 && r.started_ms > 0)
    std::cout << "  " << (r.ended_ms - r.started_ms) / 1000 << "s";
  if (!r.session_id.empty())
    std::cout << "  session " << r.session_id;
  std::cout << "\n";
  if (!r.error.empty())
    std::cout << "    error: " << one_line(r.error, 300) << "\n";
  else if (!r.result.empty())
    std::cout << "    " << one_line(r.result, 300) << "\n";
}

// `run ID` with no scheduler anywhere: this process runs one for the run.
int run_here(const std::string& id, bool as_json, options opts) {
  std::string error;
  auto made = create_runtime(std::move(opts));
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  cron_scheduler_options so;
  so.holder = "mibyan cron run " + id;
  if (auto st = start_cron_scheduler(*rt, so); !st) {
    std::cerr << "mibyan cron run: cannot start a scheduler: " << st.error
              << "\n";
    return 1;
  }
  auto jobs = cron_of(*rt);
  // The scheduler takes the store's lease as it starts (unless another
  // process took it meanwhile: then the verb goes there and that one runs
  // the job).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{15};
  while (!cron_stats(*rt).active
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  auto t0 = now_ms();
  auto queued = jobs->run_now(id);
  if (!queued)
    return report("run", queued, id);
  std::cerr << "mibyan cron: running job " << id << " in this process\n";
  // Wait for the manual run's record to end (a run takes as long as its
  // turn: no deadline; Ctrl-C ends the process and the run is found
  // interrupted later).
  for (;;) {
    bool more = false;
    auto runs = jobs->history(id, 5, 0, &more);
    if (!runs)
      return report("run", runs);
    for (auto& r : *runs)
      if (r.trigger == cron_trigger::manual && r.started_ms >= t0 - 1000
          && r.ended_ms > 0 && r.status != cron_run_status::running) {
        if (as_json)
          std::cout << cron_run_to_json(r).pretty() << "\n";
        else
          print_run_text(r, queued->timezone);
        return cron_status_is_success(r.status) ? 0 : 1;
      }
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
}

} // namespace

int cron_command(const std::vector<std::string>& args,
                 const global_flags& flags) {
  // `mibyan cron run [FLAGS]` without an id: the foreground scheduler,
  // whose flags are its own.
  if (!args.empty() && args[0] == "run"
      && (args.size() == 1 || (!args[1].empty() && args[1][0] == '-')))
    return cron_run_command(
      std::vector<std::string>(args.begin() + 1, args.end()), flags);
  cron_args a;
  if (auto rc = parse(args, a); rc != 0)
    return rc < 0 ? 0 : rc;
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  bool reads = a.verb == "list" || a.verb == "show" || a.verb == "history";
  auto configured = store_options_from(opts);
  if (!configured) {
    std::cerr << "mibyan cron: " << configured.error << "\n";
    return 2;
  }
  session_store_options so = std::move(*configured);
  so.read_only = reads;
  auto opened = open_session_store(so);
  if (!opened && opened.code == status_code::config_invalid) {
    std::cerr << "mibyan cron: " << opened.error << "\n";
    return 2;
  }
  if (!opened && reads && opened.code == status_code::not_found) {
    // No store yet: nothing was ever scheduled.
    if (a.verb == "list") {
      std::cout << (a.as_json ? "[]\n" : "no jobs\n");
      return 0;
    }
    std::cerr << "mibyan cron " << a.verb << ": no job '" << a.id
              << "' (no job store yet: " << so.dir << ")\n";
    return 1;
  }
  if (!opened) {
    std::cerr << "mibyan cron: cannot open the store: " << opened.error
              << "\n";
    return 1;
  }
  std::shared_ptr<session_store> store = std::move(*opened);
  auto jobs = open_cron_service(store, so.dir, opts);
  if (!jobs) {
    std::cerr << "mibyan cron: the job service is unavailable\n";
    return 1;
  }
  auto print_job = [&](const cron_job& j) {
    if (a.as_json)
      std::cout << cron_job_view(j).pretty() << "\n";
    else
      print_job_text(j);
  };

  if (a.verb == "list") {
    auto all = jobs->list();
    if (!all)
      return report("list", all);
    for (auto& d : all->damaged)
      std::cerr << "mibyan cron: a stored job cannot be read: " << d << "\n";
    if (a.as_json) {
      json::value out = json::value::make_array();
      for (auto& j : all->jobs)
        out.push_back(cron_job_view(j));
      std::cout << out.pretty() << "\n";
      return 0;
    }
    if (all->jobs.empty()) {
      std::cout << "no jobs\n";
      return 0;
    }
    auto now = now_ms();
    for (auto& j : all->jobs) {
      auto sched = cron_job_schedule(j);
      std::cout << j.id << "  " << one_line(j.name, 40) << "\n    "
                << (sched ? sched->describe() : "invalid schedule")
                << "; next: " << cron_next_run_text(j, now)
                << "; last: "
                << (j.last_status.empty() ? std::string{"-"} : j.last_status)
                << "\n";
    }
    auto where = jobs->scheduler();
    if (!where.here && where.holder.empty())
      std::cout << "(no scheduler is running: jobs run while `mibyan serve`, "
                   "`mibyan cron run` or a gateway node runs)\n";
    return 0;
  }
  if (a.verb == "show") {
    auto j = jobs->get(a.id);
    if (!j)
      return report("show", j, a.id);
    print_job(*j);
    return 0;
  }
  if (a.verb == "history") {
    auto j = jobs->get(a.id);
    if (!j)
      return report("history", j, a.id);
    bool more = false;
    auto runs = jobs->history(a.id, static_cast<size_t>(a.limit),
                              static_cast<size_t>(a.offset), &more);
    if (!runs)
      return report("history", runs, a.id);
    if (a.as_json) {
      json::value out;
      out["job_id"] = a.id;
      json::value list = json::value::make_array();
      for (auto& r : *runs)
        list.push_back(cron_run_to_json(r));
      out["runs"] = std::move(list);
      out["more"] = more;
      std::cout << out.pretty() << "\n";
      return 0;
    }
    if (runs->empty())
      std::cout << (a.offset > 0 ? "no older runs\n" : "no runs yet\n");
    for (auto& r : *runs)
      print_run_text(r, j->timezone);
    if (more)
      std::cout << "(older runs: --offset " << a.offset + a.limit << ")\n";
    return 0;
  }
  if (a.verb == "add") {
    const auto& def = a.def;
    auto zone = opts.cron.default_timezone.empty() ? cron_local_zone_name()
                                                    : opts.cron.default_timezone;
    auto job = cron_job_from_json(def, zone);
    if (!job)
      return report("add", job);
    job->created_by = "user";
    auto added = jobs->add(std::move(*job));
    if (!added)
      return report("add", added);
    if (!a.as_json)
      std::cout << "added job " << added->id << "\n";
    print_job(*added);
    return 0;
  }
  if (a.verb == "edit") {
    if (a.def.as_object().empty()) {
      std::cerr << "mibyan cron edit: nothing to change (give the flags of "
                   "add)\n";
      return 2;
    }
    auto r = jobs->update(a.id, a.def);
    if (!r)
      return report("edit", r, a.id);
    print_job(*r);
    return 0;
  }
  if (a.verb == "pause" || a.verb == "resume") {
    auto r = a.verb == "pause" ? jobs->pause(a.id, a.reason)
                               : jobs->resume(a.id);
    if (!r)
      return report(a.verb, r, a.id);
    print_job(*r);
    return 0;
  }
  if (a.verb == "remove") {
    if (auto st = jobs->remove(a.id); !st)
      return report("remove", st, a.id);
    if (a.as_json) {
      json::value v;
      v["removed"] = a.id;
      std::cout << v.dump() << "\n";
    } else {
      std::cout << "removed job " << a.id << "\n";
    }
    return 0;
  }
  // run ID: queued on the store's scheduler when one runs.
  auto r = jobs->run_now(a.id);
  if (!r) {
    if (r.code != status_code::unavailable)
      return report("run", r, a.id);
    // unavailable: the job is busy, or no scheduler runs for the store;
    // the lease tells which.
    {
      auto probe = cron_lease::try_acquire(
        *store, "mibyan cron run (probe)",
        cron_lease::ttl_for(opts.cluster.failure_timeout_ms));
      if (!probe)
        return report("run", r, a.id);
    }
    jobs.reset();
    store.reset();
    return run_here(a.id, a.as_json, std::move(opts));
  }
  auto where = jobs->scheduler();
  if (a.as_json) {
    json::value v;
    v["job_id"] = a.id;
    v["queued"] = true;
    v["scheduler"] = where.holder;
    std::cout << v.dump() << "\n";
  } else {
    std::cout << "queued a run of job " << a.id << " on the scheduler ("
              << where.holder << "); see `mibyan cron history " << a.id
              << "`\n";
  }
  return 0;
}

} // namespace mibyan::cli
