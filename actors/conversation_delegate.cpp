// Conversation actor, part: delegate_task (how the actor is split:
// actors/conversation_internal.hpp; behaviour: docs/tools.md,
// "delegate_task").
//
// Each task runs as a child conversation actor with its own session
// (parent_session_id = this session), its own iteration budget
// (delegation.max_iterations), a restricted tool set
// (delegation.blocked_tools) and its own kernels and processes (keyed by
// its session id, released when it ends). At most
// delegation.max_concurrent_children children of one call run at once.
//
// Parent and child talk only through typed messages: the writer creates
// the child's session (create_atom), the child gets one turn
// (turn_atom, turn_request -> turn result JSON text) and interrupts
// (interrupt_atom). Nothing is shared in memory, so `spawn_child` is the
// one place to change for a child on another node.
#include "actors/conversation_internal.hpp"

#include <algorithm>
#include <utility>

#include "base/json.hpp"
#include "base/log.hpp"
#include "base/process_registry.hpp"
#include "tools/read_tracker.hpp"

namespace mibyan::conversation_detail {

struct delegation_run {
  struct task {
    std::string goal;
    std::string context;
    std::string session_id;
    conversation_actor child;
    int64_t started_ms = 0;
    bool running = false;
    bool finished = false;
    json::value result;
  };
  uint64_t turn = 0;
  uint64_t batch = 0;
  size_t call_index = 0;
  std::vector<task> tasks;
  size_t next = 0;    // first task not started
  size_t running = 0; // children running now
  size_t finished = 0;
  int64_t started_ms = 0;
  bool interrupted = false;
  bool delivered = false;
  std::function<void()> then;
};

namespace {

constexpr size_t max_title_chars = 100;

std::string child_prompt(const delegation_run::task& t) {
  std::string out = "You are a subagent working for another agent. Your "
                    "task:\n"
                    + t.goal;
  if (!t.context.empty())
    out += "\n\nContext:\n" + t.context;
  out += "\n\nWork on it with your tools. When done, answer with a concise "
         "summary of what you did and found; that summary is all the other "
         "agent sees.";
  return out;
}

double seconds_since(int64_t start_ms) {
  return static_cast<double>(now_ms() - start_ms) / 1000.0;
}

// The result entry of a task from the child's turn result (JSON text).
json::value task_entry(size_t index, const delegation_run::task& t,
                       const std::string& turn_json,
                       const std::string& failure) {
  json::value e;
  e["task_index"] = static_cast<int64_t>(index);
  e["session_id"] = t.session_id;
  e["duration_seconds"] = seconds_since(t.started_ms);
  if (!failure.empty()) {
    e["status"] = "error";
    e["summary"] = json::value{};
    e["error"] = failure;
    e["api_calls"] = int64_t{0};
    e["exit_reason"] = "error";
    return e;
  }
  auto parsed = json::parse_members(
    turn_json, {"final_response", "api_calls", "completed", "interrupted",
                "failed", "turn_exit_reason", "model", "input_tokens",
                "output_tokens", "error"});
  if (!parsed || !parsed.v->is_object()) {
    e["status"] = "error";
    e["error"] = "malformed child turn result";
    e["exit_reason"] = "error";
    return e;
  }
  auto& r = *parsed.v;
  const char* status = "ok";
  if (r.get_bool("interrupted", false))
    status = "interrupted";
  else if (!r.get_bool("completed", false))
    status = "error";
  e["status"] = status;
  auto fr = r.find("final_response");
  e["summary"] = fr != nullptr && fr->is_string() ? *fr : json::value{};
  e["api_calls"] = r.get_int("api_calls", 0);
  e["model"] = r.get_string("model");
  e["exit_reason"] = r.get_string("turn_exit_reason");
  e["tokens"]["input"] = r.get_int("input_tokens", 0);
  e["tokens"]["output"] = r.get_int("output_tokens", 0);
  if (auto err = r.get_string("error"); !err.empty())
    e["error"] = err;
  return e;
}

std::string run_result(const delegation_run& run) {
  json::value out;
  out["results"] = json::value::make_array();
  for (size_t i = 0; i < run.tasks.size(); ++i) {
    auto& t = run.tasks[i];
    if (t.finished) {
      out["results"].push_back(t.result);
      continue;
    }
    json::value e;
    e["task_index"] = static_cast<int64_t>(i);
    e["status"] = "interrupted";
    e["summary"] = json::value{};
    e["exit_reason"] = "interrupted_by_user";
    if (!t.session_id.empty())
      e["session_id"] = t.session_id;
    out["results"].push_back(std::move(e));
  }
  out["total_duration_seconds"] = seconds_since(run.started_ms);
  return out.dump();
}

// The tool event of the delegate_task call itself, for the turn's sink.
void delegate_event(conv_pointer self, const turn_state& t,
                    const tool_call& c, const char* kind, json::value v) {
  auto sink = t.p.req.sink;
  if (!sink)
    return;
  v["id"] = c.id;
  v["name"] = c.name;
  if (self->state.deps.depth > 0)
    v["depth"] = self->state.deps.depth;
  caf::anon_send(sink, delta_atom_v, self->state.deps.session_id,
                 std::string{kind}, v.dump());
}

// Delivers the run's result once: into the batch when it is still the
// running one.
void deliver_run(conv_pointer self, const std::shared_ptr<delegation_run>& run) {
  if (run->delivered)
    return;
  run->delivered = true;
  auto tp = current(self, run->turn);
  if (tp == nullptr || tp->batch != run->batch)
    return;
  auto& dl = tp->delegations;
  dl.erase(std::remove(dl.begin(), dl.end(), run), dl.end());
  auto text = run_result(*run);
  json::value ev;
  ev["result"] = text;
  ev["duration_us"] = (now_ms() - run->started_ms) * 1000;
  delegate_event(self, *tp, tp->plan.calls[run->call_index].call, "tool_end",
                 std::move(ev));
  tp->results[run->call_index] = std::move(text);
  auto then = std::move(run->then);
  then();
}

// Frees what the child `sid` held: its kernels, background processes,
// approvals and read records; ends its session in the store.
void release_child(conv_pointer self, const std::string& sid,
                   const conversation_actor& child, bool interrupted) {
  auto& st = self->state;
  if (child) {
    self->unlink_from(child); // its exit must not end the parent
    self->send_exit(child, caf::exit_reason::user_shutdown);
  }
  if (st.deps.kernels)
    self->send(st.deps.kernels, dispose_atom_v, sid);
  self->request(st.deps.writer, caf::infinite, end_atom_v, sid,
                std::string{interrupted ? "interrupted" : "delegation_done"})
    .then([](bool) {}, [](caf::error&) {});
  auto svc = st.deps.svc;
  auto job = [svc, sid] {
    if (svc->processes)
      svc->processes->close_session(sid); // waits for the kills
    if (svc->approvals)
      svc->approvals->forget_session(sid);
    forget_session_reads(sid);
  };
  if (!svc->pool || !svc->pool->submit(job))
    forget_session_reads(sid);
}

void start_children(conv_pointer self, std::shared_ptr<delegation_run> run);

void child_done(conv_pointer self, std::shared_ptr<delegation_run> run,
                size_t i, const std::string& turn_json,
                const std::string& failure) {
  auto& t = run->tasks[i];
  if (t.finished)
    return;
  t.finished = true;
  t.running = false;
  if (auto& gate = self->state.deps.svc->approvals)
    gate->channels()->forget(t.session_id);
  t.result = task_entry(i, t, turn_json, failure);
  --run->running;
  ++run->finished;
  auto& st = self->state;
  MIBYAN_LOG(info, "delegate",
             st.deps.session_id << ": child " << t.session_id << " ended: "
                                << t.result.get_string("status"));
  release_child(self, t.session_id, t.child,
                t.result.get_string("status") == "interrupted");
  t.child = nullptr;
  if (run->finished == run->tasks.size())
    deliver_run(self, run);
  else
    start_children(self, run);
}

// Spawns the child conversation of task `i` (its session exists) and
// sends it its one turn.
void spawn_child(conv_pointer self, std::shared_ptr<delegation_run> run,
                 size_t i) {
  auto& st = self->state;
  auto tp = current(self, run->turn);
  auto& t = run->tasks[i];
  if (tp == nullptr || run->interrupted) {
    child_done(self, run, i, {}, "interrupted before the child started");
    return;
  }
  // A child gets no memory snapshot: the memory tool is blocked for it and
  // parent and child share no memory (docs/tools.md, "delegate_task").
  conversation_deps deps{st.deps.svc,    st.deps.dispatcher, st.deps.writer,
                         st.deps.store,  st.deps.store_error, t.session_id,
                         st.deps.kernels, st.deps.depth + 1,
                         /*memory_snapshot=*/{}};
  t.child = spawn_conversation(self->system(), std::move(deps));
  // The child dies with its parent (a closed session, a shutdown).
  self->link_to(t.child);
  auto& cfg = st.deps.svc->cfg;
  turn_request req;
  req.text = child_prompt(t);
  req.max_iterations = cfg.delegation.max_iterations;
  req.toolsets = tp->p.req.toolsets;
  req.blocked_tools = cfg.delegation.blocked_tools;
  req.stream = false;
  // The child's tool events go straight to the parent's sink, marked with
  // their depth (shown indented).
  req.sink = tp->p.req.sink;
  req.provider = tp->p.req.provider;
  req.model = tp->p.req.model;
  req.provider_name = tp->p.req.provider_name;
  req.base_url = tp->p.req.base_url;
  self->request(t.child, caf::infinite, turn_atom_v, std::move(req))
    .then(
      [self, run, i](std::string& res) { child_done(self, run, i, res, {}); },
      [self, run, i](caf::error& err) {
        child_done(self, run, i, {},
                   "the child failed: " + error_text(self->system(), err));
      });
}

void start_children(conv_pointer self, std::shared_ptr<delegation_run> run) {
  auto& st = self->state;
  auto limit = static_cast<size_t>(
    std::max<int64_t>(1, st.deps.svc->cfg.delegation.max_concurrent_children));
  while (run->next < run->tasks.size() && run->running < limit
         && !run->interrupted) {
    auto i = run->next++;
    auto& t = run->tasks[i];
    ++run->running;
    t.running = true;
    t.started_ms = now_ms();
    auto parent = st.deps.session_id;
    t.session_id = parent + "::child::" + std::to_string(t.started_ms) + "."
                   + std::to_string(run->batch) + "." + std::to_string(i);
    if (t.session_id.size() > 128) // the store's id limit
      t.session_id = "child_" + std::to_string(t.started_ms) + "."
                     + std::to_string(run->batch) + "." + std::to_string(i);
    // The child asks through the parent's per-session channels, if any.
    if (auto& gate = st.deps.svc->approvals)
      gate->channels()->alias(t.session_id, parent);
    session_meta meta;
    meta.id = t.session_id;
    meta.source = "delegate";
    meta.cwd = st.cwd;
    meta.parent_session_id = parent;
    meta.title = t.goal.substr(0, max_title_chars);
    if (auto tp = current(self, run->turn)) {
      meta.model = tp->p.req.model;
      meta.provider = tp->p.req.provider_name;
    }
    self->request(st.deps.writer, caf::infinite, create_atom_v, meta)
      .then([self, run, i](std::string&) { spawn_child(self, run, i); },
            [self, run, i](caf::error& err) {
              child_done(self, run, i, {},
                         "cannot create the child session: "
                           + error_text(self->system(), err));
            });
  }
  if (run->interrupted && run->running == 0)
    deliver_run(self, run);
}

} // namespace

void start_delegation(conv_pointer self, size_t idx,
                      std::function<void()> then) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto& c = t.plan.calls[idx].call;
  auto fail = [&](const std::string& msg) {
    t.results[idx] = error_result(msg).dump();
    then();
  };
  if (st.deps.depth > 0) {
    fail("delegate_task is not available to a subagent");
    return;
  }
  // At most max_concurrent_children delegate_task calls per message.
  size_t ordinal = 0;
  for (size_t i = 0; i < idx; ++i)
    if (t.plan.calls[i].call.name == "delegate_task")
      ++ordinal;
  auto cap = st.deps.svc->cfg.delegation.max_concurrent_children;
  if (static_cast<int64_t>(ordinal) >= cap) {
    fail("skipped: at most " + std::to_string(cap)
         + " delegate_task calls per message; put several tasks into one "
           "call's `tasks` instead");
    return;
  }
  auto args = json::parse(c.arguments.empty() ? std::string{"{}"}
                                              : c.arguments);
  if (!args || !args.v->is_object()) {
    fail("delegate_task: the arguments are not a JSON object");
    return;
  }
  auto run = std::make_shared<delegation_run>();
  auto& a = *args.v;
  if (auto tasks = a.find("tasks"); tasks != nullptr && tasks->is_array()
                                    && tasks->size() > 0) {
    for (auto& x : tasks->as_array()) {
      delegation_run::task task;
      if (x.is_object()) {
        task.goal = x.get_string("goal");
        task.context = x.get_string("context");
      } else if (x.is_string()) {
        task.goal = x.as_string();
      }
      if (trim(task.goal).empty()) {
        fail("delegate_task: every task needs a non-empty goal");
        return;
      }
      run->tasks.push_back(std::move(task));
    }
  } else if (!trim(a.get_string("goal")).empty()) {
    delegation_run::task task;
    task.goal = a.get_string("goal");
    task.context = a.get_string("context");
    run->tasks.push_back(std::move(task));
  } else {
    fail("delegate_task needs a `goal` or a non-empty `tasks` list");
    return;
  }
  run->turn = t.id;
  run->batch = t.batch;
  run->call_index = idx;
  run->started_ms = now_ms();
  run->then = std::move(then);
  t.delegations.push_back(run);
  json::value ev;
  ev["arguments"] = c.arguments;
  ev["tasks"] = static_cast<int64_t>(run->tasks.size());
  delegate_event(self, t, c, "tool_start", std::move(ev));
  MIBYAN_LOG(info, "delegate",
             st.deps.session_id << ": delegating " << run->tasks.size()
                                << " task(s)");
  start_children(self, run);
}

void interrupt_delegations(conv_pointer self, const std::string& reason) {
  auto& st = self->state;
  if (!st.cur)
    return;
  auto& t = *st.cur;
  for (auto& run : t.delegations) {
    run->interrupted = true;
    for (auto& task : run->tasks)
      if (task.running && task.child)
        self->send(task.child, interrupt_atom_v, reason);
    // The batch closes now; the children's late answers only release
    // their resources.
    if (t.batch == run->batch && !run->delivered) {
      t.results[run->call_index] = run_result(*run);
      run->delivered = true;
    }
  }
  t.delegations.clear();
}

} // namespace mibyan::conversation_detail
