// Tool calls in a cluster (docs/cluster.md, "Placement" and "Failure"):
// the routing side places a session on a worker by rendezvous hashing,
// sticks to it, forwards the calls and tracks them, so a lost worker's
// calls are answered at once; the worker side runs them on its own
// dispatcher (the session's kernel and the kernel's tool calls stay on
// that worker).
#include "cluster/internal.hpp"

#include "caf/all.hpp"

#include "base/json.hpp"
#include "base/log.hpp"
#include "actors/kernel_checkpoints.hpp"
#include "cluster/placement.hpp"
#include "runtime/runtime.hpp"
#include "tools/tool.hpp"

namespace mibyan {

namespace {

tool_response error_response(const tool_request& req,
                             const std::string& message) {
  json::value r = error_result(message);
  if (req.tool == "execute_code") {
    r["status"] = "error";
    r["output"] = "";
  }
  return tool_response{req.call_id, req.tool, r.dump(), 0, false};
}

bool worker_up(const std::string& state, bool existing) {
  return state == "up" || state == "suspect"
         || (existing && state == "draining");
}

// Whether `id` may run a call of a session (existing: already placed
// there).
bool usable(cluster_actor* self, const std::string& id, bool existing) {
  auto& st = self->state;
  if (id == st.cfg.node_id)
    return is_worker_role(st.cfg.role) && !st.left
           && (st.state == "up" || existing);
  auto it = st.peers.find(id);
  return it != st.peers.end() && it->second.handle
         && is_worker_role(it->second.info.role)
         && worker_up(it->second.info.state, existing);
}

int64_t placed_on(cluster_actor* self, const std::string& id) {
  int64_t n = 0;
  for (auto& kv : self->state.placement)
    n += kv.second == id ? 1 : 0;
  return n;
}

std::vector<placement_candidate> candidates(cluster_actor* self) {
  auto& st = self->state;
  std::vector<placement_candidate> out;
  if (usable(self, st.cfg.node_id, false))
    out.push_back({st.cfg.node_id,
                   static_cast<int64_t>(st.hosted.size()) < st.cfg.max_sessions
                     && placed_on(self, st.cfg.node_id) < st.cfg.max_sessions});
  for (auto& kv : st.peers) {
    if (!usable(self, kv.first, false))
      continue;
    auto& info = kv.second.info;
    auto cap = info.max_sessions > 0 ? info.max_sessions : st.cfg.max_sessions;
    auto used = std::max(info.sessions, placed_on(self, kv.first));
    out.push_back({kv.first, used < cap});
  }
  return out;
}

} // namespace

bool is_worker_role(const std::string& role) {
  return role == "worker" || role == "all";
}

bool is_gateway_role(const std::string& role) {
  return role == "gateway" || role == "all";
}

std::string annotate_result(const std::string& result_json,
                            const std::string& node_id, bool state_reset) {
  auto end = result_json.find_last_not_of(" \t\r\n");
  auto begin = result_json.find_first_not_of(" \t\r\n");
  if (end == std::string::npos || result_json[begin] != '{'
      || result_json[end] != '}')
    return result_json;
  if (state_reset) {
    // The fresh kernel says so where execute_code reports resets too,
    // unless it restored the session's checkpoint.
    auto parsed = json::parse(result_json);
    if (parsed && parsed.v->is_object()) {
      auto& r = *parsed.v;
      r["node"] = node_id;
      if (auto k = r.find("kernel");
          k != nullptr && k->is_object() && k->get_bool("state_restored",
                                                        false))
        return r.dump();
      r["state_reset"] = true;
      if (auto k = r.find("kernel"); k != nullptr && k->is_object())
        (*k)["state_reset"] = true;
      return r.dump();
    }
  }
  std::string extra = "\"node\":" + json::value{node_id}.dump();
  if (state_reset)
    extra += ",\"state_reset\":true";
  auto inner = result_json.find_first_not_of(" \t\r\n", begin + 1);
  bool empty = inner == end;
  std::string out = result_json.substr(0, end);
  out += empty ? extra : "," + extra;
  out += '}';
  return out;
}

std::string lost_worker_result(const std::string& tool,
                               const std::string& worker,
                               const std::string& why, bool checkpoints) {
  json::value r = error_result(
    "Worker node " + worker + " was lost (" + why
    + (checkpoints
         ? ") while it ran this call: the call's outcome is unknown. The "
           "next call of this session runs on another live worker, and the "
           "next execute_code restores the session's kernel state from its "
           "last checkpoint there (state_restored: true; this call's "
           "changes may be missing)."
         : ") while it ran this call: the call's outcome is unknown and the "
           "session's kernel state (variables, imports) was lost with it. "
           "The next call of this session runs on another live worker, and "
           "the next execute_code starts a fresh kernel there (state_reset: "
           "true)."));
  if (tool == "execute_code") {
    r["status"] = "error";
    r["output"] = "";
  }
  r["worker_lost"] = true;
  r["kernel_state_lost"] = !checkpoints;
  r["node"] = worker;
  return r.dump();
}

void route_call(cluster_actor* self, tool_request req,
                caf::typed_response_promise<tool_response> rp) {
  auto& st = self->state;
  auto sid = req.session_id;
  std::string worker;
  if (auto it = st.placement.find(sid); it != st.placement.end()) {
    if (usable(self, it->second, true)) {
      worker = it->second;
    } else {
      MIBYAN_LOG(info, "cluster", "session " << sid << ": worker "
                                             << it->second
                                             << " is gone; placing again");
      st.reset_pending.insert(sid);
      st.placement.erase(it);
    }
  }
  if (worker.empty()) {
    auto cands = candidates(self);
    worker = place_session(sid, cands);
    if (worker.empty()) {
      rp.deliver(error_response(
        req, "No live worker with free capacity in the cluster ("
               + std::to_string(cands.size())
               + " live worker(s) seen by node " + st.cfg.node_id
               + "): the call was not run. Retry when workers are back."));
      return;
    }
    st.placement[sid] = worker;
    MIBYAN_LOG(info, "cluster", "session " << sid << " placed on worker "
                                           << worker << " (" << cands.size()
                                           << " live worker(s))");
  }
  bool reset = req.tool == "execute_code" && st.reset_pending.count(sid) > 0;
  ++st.busy;
  if (worker == st.cfg.node_id) {
    // This node is the worker: its own dispatcher runs the call.
    auto& h = st.hosted[sid];
    h.gateway = st.cfg.node_id;
    h.last_used = st.cfg.clock->steady_now();
    auto me = st.cfg.node_id;
    self->request(st.local, caf::infinite, invoke_atom_v, req)
      .then(
        [self, rp, me, sid, reset](tool_response& r) mutable {
          --self->state.busy;
          if (reset)
            self->state.reset_pending.erase(sid);
          if (r.tool == "execute_code")
            note_routed_result(self, sid, r.result_json, false);
          r.result_json = annotate_result(r.result_json, me, reset);
          rp.deliver(std::move(r));
        },
        [self, rp, req](caf::error& e) mutable {
          --self->state.busy;
          rp.deliver(error_response(req, "Runtime error: "
                                           + self->system().render(e)));
        });
    return;
  }
  // The gateway's directory means nothing on another machine: the worker
  // runs the session in its --workdir.
  if (req.cwd == st.cfg.own_cwd)
    req.cwd.clear();
  auto id = ++st.next_call;
  st.inflight.emplace(id,
                      pending_call{worker, sid, req.tool, req.call_id, rp});
  auto handle = st.peers[worker].handle;
  self->request(handle, caf::infinite, work_atom_v, req)
    .then(
      [self, id, worker, sid, reset](tool_response& r) {
        auto& st = self->state;
        auto it = st.inflight.find(id);
        if (it == st.inflight.end())
          return; // already answered (the worker was lost)
        auto rp = it->second.rp;
        st.inflight.erase(it);
        --st.busy;
        if (reset)
          st.reset_pending.erase(sid);
        if (r.tool == "execute_code")
          note_routed_result(self, sid, r.result_json, false);
        r.result_json = annotate_result(r.result_json, worker, reset);
        rp.deliver(std::move(r));
      },
      [self, id, worker, req](caf::error& e) {
        auto& st = self->state;
        auto it = st.inflight.find(id);
        if (it == st.inflight.end())
          return;
        auto rp = it->second.rp;
        st.inflight.erase(it);
        --st.busy;
        auto r = error_response(req, "Worker node " + worker
                                       + " failed the call: "
                                       + self->system().render(e));
        r.result_json = annotate_result(r.result_json, worker, false);
        rp.deliver(std::move(r));
      });
}

void work_call(cluster_actor* self, const caf::node_id& sender_node,
               tool_request req,
               caf::typed_response_promise<tool_response> rp) {
  auto& st = self->state;
  std::string gateway = "client";
  for (auto& kv : st.peers)
    if (kv.second.caf_node == sender_node)
      gateway = kv.first;
  auto it = st.hosted.find(req.session_id);
  if (it == st.hosted.end()) {
    if (st.state != "up" || st.left) {
      rp.deliver(error_response(req, "Worker node " + st.cfg.node_id
                                       + " is draining and takes no new "
                                         "sessions"));
      return;
    }
    if (static_cast<int64_t>(st.hosted.size()) >= st.cfg.max_sessions) {
      rp.deliver(error_response(req, "Worker node " + st.cfg.node_id
                                       + " is full (cluster.max_sessions = "
                                       + std::to_string(st.cfg.max_sessions)
                                       + ")"));
      return;
    }
    it = st.hosted.emplace(req.session_id, hosted_session{}).first;
    MIBYAN_LOG(info, "cluster", "hosting session " << req.session_id
                                                   << " for " << gateway);
  }
  it->second.gateway = gateway;
  it->second.last_used = st.cfg.clock->steady_now();
  ++st.busy;
  self->request(st.local, caf::infinite, invoke_atom_v, req)
    .then(
      [self, rp](tool_response& r) mutable {
        --self->state.busy;
        rp.deliver(std::move(r));
      },
      [self, rp, req](caf::error& e) mutable {
        --self->state.busy;
        rp.deliver(error_response(req, "Runtime error: "
                                         + self->system().render(e)));
      });
}

void worker_lost(cluster_actor* self, const std::string& id,
                 const std::string& why) {
  auto& st = self->state;
  size_t calls = 0, sessions = 0;
  for (auto it = st.inflight.begin(); it != st.inflight.end();) {
    if (it->second.worker != id) {
      ++it;
      continue;
    }
    auto& p = it->second;
    if (p.tool == "execute_code")
      note_routed_result(self, p.session, {}, true);
    auto hub = kernel_checkpoints_of(*st.rt);
    tool_response r{p.call_id, p.tool,
                    lost_worker_result(p.tool, id, why,
                                       hub && hub->enabled()),
                    0, false, p.tool == "execute_code"};
    p.rp.deliver(std::move(r));
    --st.busy;
    ++calls;
    it = st.inflight.erase(it);
  }
  for (auto it = st.placement.begin(); it != st.placement.end();) {
    if (it->second != id) {
      ++it;
      continue;
    }
    st.reset_pending.insert(it->first);
    ++sessions;
    it = st.placement.erase(it);
  }
  if (calls + sessions > 0)
    MIBYAN_LOG(warning, "cluster", "worker " << id << " gone: " << calls
                                             << " call(s) answered, "
                                             << sessions
                                             << " session(s) to place again");
}

void gateway_lost(cluster_actor* self, const std::string& id) {
  auto& st = self->state;
  size_t n = 0;
  for (auto it = st.hosted.begin(); it != st.hosted.end();) {
    if (it->second.gateway != id) {
      ++it;
      continue;
    }
    // Running cells die with the interrupt; idle kernels are reaped by
    // the registry after code_execution.kernel_idle_timeout.
    self->send(st.local, interrupt_atom_v,
               interrupt_request{it->first, "the gateway " + id
                                              + " was lost"});
    ++n;
    it = st.hosted.erase(it);
  }
  if (n > 0)
    MIBYAN_LOG(warning, "cluster", "gateway " << id << " gone: interrupted "
                                              << n << " session(s)");
}

} // namespace mibyan
