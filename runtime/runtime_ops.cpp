// The operator console's views of a runtime (runtime/runtime.hpp): the
// turn-event hub, the kernels with their memory, kernel reset, the MCP
// servers and their reconnect (docs/serve.md, "Operator console").
#include "runtime/runtime.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "caf/all.hpp"

#include "actors/outside_spawn.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/turn_events.hpp"
#include "tools/mcp/mcp_tools.hpp"

namespace mibyan {

namespace {

// Resident pages of `pid` (/proc/<pid>/statm, second field); 0 if gone.
int64_t resident_pages(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident))
    return 0;
  return resident;
}

// The children of `pid` (all its threads' children files).
std::vector<int64_t> children_of(int64_t pid) {
  std::vector<int64_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/"
                   + std::to_string(pid) + "/children");
  int64_t c = 0;
  while (in >> c)
    out.push_back(c);
  return out;
}

// Resident bytes of `pid` and its descendants (a sandboxed kernel's pid is
// bwrap's; the interpreter is below it). Blocking file reads: pool only.
int64_t tree_rss_bytes(int64_t pid) {
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  int64_t pages = 0;
  std::set<int64_t> seen;
  std::vector<int64_t> todo{pid};
  while (!todo.empty() && seen.size() < 256) {
    auto p = todo.back();
    todo.pop_back();
    if (p <= 0 || !seen.insert(p).second)
      continue;
    pages += resident_pages(p);
    for (auto c : children_of(p))
      todo.push_back(c);
  }
  return pages * page;
}

using kernels_done
  = std::function<void(std::vector<kernel_view>, std::string)>;

// Runs `done` on the blocking pool with the memory of each kernel read
// there; inline (with an error) when the pool refuses.
void finish_on_pool(const std::shared_ptr<runtime_services>& svc,
                    std::vector<kernel_info> infos, kernels_done done) {
  auto job = [infos = std::move(infos), done]() mutable {
    std::vector<kernel_view> out;
    out.reserve(infos.size());
    for (auto& k : infos) {
      kernel_view v;
      v.session_id = std::move(k.session_id);
      v.pid = k.pid;
      v.mode = std::move(k.mode);
      v.sandbox = std::move(k.sandbox);
      v.uptime_s = k.uptime_ms / 1000;
      v.cells = k.cells;
      v.busy = k.busy;
      v.rss_bytes = tree_rss_bytes(k.pid);
      out.push_back(std::move(v));
    }
    done(std::move(out), {});
  };
  auto shared = std::make_shared<decltype(job)>(std::move(job));
  if (!svc->pool || !svc->pool->submit([shared] { (*shared)(); }))
    done({}, "the runtime is shutting down");
}

} // namespace

turn_event_hub& turn_events_of(runtime& rt) {
  return *runtime_access::of(rt).events;
}

void list_kernels(runtime& rt, kernels_done done) {
  auto& p = runtime_access::of(rt);
  kernel_registry_actor kernels;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (!p.closing)
      kernels = p.kernels;
  }
  if (!kernels) {
    done({}, "the runtime is shutting down");
    return;
  }
  auto svc = p.svc;
  // A short-lived actor asks the registry: the caller never waits.
  outside_spawn_guard guard;
  p.sys->spawn([kernels, svc, done](caf::event_based_actor* self) {
    self->request(kernels, std::chrono::seconds(5), kernels_atom_v)
      .then(
        [self, svc, done](std::vector<kernel_info>& infos) {
          self->quit();
          finish_on_pool(svc, std::move(infos), done);
        },
        [self, done](caf::error& e) {
          self->quit();
          done({}, "the kernel registry did not answer: "
                     + self->system().render(e));
        });
  });
}

void reset_kernels(runtime& rt, const std::string& session_id) {
  auto& p = runtime_access::of(rt);
  std::lock_guard<std::mutex> guard{p.mtx};
  if (p.kernels)
    caf::anon_send(p.kernels, dispose_atom_v, session_id);
}

std::vector<mcp_server_report> mcp_servers_of(runtime& rt) {
  auto& svc = *runtime_access::of(rt).svc;
  if (!svc.mcp)
    return {};
  return svc.mcp->report();
}

status reconnect_mcp(runtime& rt, const std::string& name) {
  auto& svc = *runtime_access::of(rt).svc;
  auto session = svc.mcp ? svc.mcp->find(name) : nullptr;
  if (!session)
    return status::failure(status_code::not_found,
                           "no MCP server '" + name
                             + "' is configured and enabled");
  session->disconnect("reconnect requested from the operator console");
  return session->connect();
}

bool run_blocking(runtime& rt, std::function<void()> job) {
  auto& svc = *runtime_access::of(rt).svc;
  return svc.pool && svc.pool->submit(std::move(job));
}

} // namespace mibyan
