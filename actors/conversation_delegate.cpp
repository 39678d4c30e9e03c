// Conversation actor, part: delegate_task (how the actor is split:
// actors/conversation_internal.hpp; behaviour: docs/tools.md,
// "delegate_task").
//
// Each task runs as a child conversation actor with its own session
// (parent_session_id = this session), its own iteration budget
// (delegation.max_iterations), a restricted tool set (the call's toolsets,
// else delegation.default_toolsets, narrowed to what the parent is offered,
// minus delegation.blocked_tools), the parent's active skill variables and
// its own kernels and processes (keyed by its session id, released when it
// ends). At most delegation.max_concurrent_children children of one call
// run at once.
//
// With `background: true` the call returns at once with task ids; each
// child runs on, unbound to the parent's turns (at most
// delegation.max_background_children per session), and its end becomes a
// notice delivered at the parent's next turn (conversation_background.cpp).
// `action: "status" | "cancel"` inspects or stops such a task.
//
// Parent and child talk only through typed messages: the writer creates
// the child's session (create_atom), the child gets one turn
// (turn_atom, turn_request -> turn_result) and interrupts
// (interrupt_atom). Nothing is shared in memory, so `spawn_child` is the
// one place to change for a child on another node.
#include "actors/conversation_internal.hpp"

#include <algorithm>
#include <utility>

#include "base/json.hpp"
#include "base/log.hpp"
#include "base/process_registry.hpp"
#include "tools/read_tracker.hpp"
#include "tools/toolsets.hpp"
#include "tools/agent/agent_tool_state.hpp"

namespace mibyan::conversation_detail {

struct delegation_run {
  struct task {
    std::string goal;
    std::string context;
    std::string session_id;
    // The last part of the child's session id ("" = its index).
    std::string label;
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
  // The child turn every task gets, minus its text: provider, model,
  // toolsets, blocked tools, the sink (none for background children).
  turn_request child_req;
  // Runs on unbound to the parent's turns; its tasks' ends are notices.
  bool background = false;
  // A background task the parent cancelled: no notice.
  bool cancelled = false;
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

// The result entry of a task from the child's turn result (`r` null when
// the child failed before answering, `failure` says why).
json::value task_entry(size_t index, const delegation_run::task& t,
                       const turn_result* r, const std::string& failure) {
  json::value e;
  e["task_index"] = static_cast<int64_t>(index);
  e["session_id"] = t.session_id;
  e["duration_seconds"] = seconds_since(t.started_ms);
  if (r == nullptr) {
    e["status"] = "error";
    e["summary"] = json::value{};
    e["error"] = failure;
    e["api_calls"] = int64_t{0};
    e["exit_reason"] = "error";
    return e;
  }
  const char* status = "ok";
  if (r->interrupted)
    status = "interrupted";
  else if (!r->completed)
    status = "error";
  e["status"] = status;
  e["summary"] = r->final_response ? json::value{*r->final_response}
                                   : json::value{};
  e["api_calls"] = r->api_calls;
  e["model"] = r->provider.model;
  e["exit_reason"] = turn_exit_reason(*r);
  e["tokens"]["input"] = r->usage.input_tokens;
  e["tokens"]["output"] = r->usage.output_tokens;
  if (!r->error.empty())
    e["error"] = r->error;
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
                    const tool_call& c, tool_event ev) {
  auto sink = t.p.req.sink;
  if (!sink)
    return;
  ev.call_id = c.id;
  ev.tool = c.name;
  ev.depth = self->state.deps.depth;
  caf::anon_send(sink, tool_event_atom_v, self->state.deps.session_id,
                 std::move(ev));
}

// Delivers the run's result once: into the batch when it is still the
// running one.
void deliver_run(conv_pointer self, const std::shared_ptr<delegation_run>& run) {
  if (run->delivered || run->background)
    return;
  run->delivered = true;
  auto tp = current(self, run->turn);
  if (tp == nullptr || tp->batch != run->batch)
    return;
  auto& dl = tp->delegations;
  dl.erase(std::remove(dl.begin(), dl.end(), run), dl.end());
  auto text = run_result(*run);
  tool_event ev;
  ev.what = tool_event::phase::end;
  ev.result_json = text;
  ev.duration_us = (now_ms() - run->started_ms) * 1000;
  delegate_event(self, *tp, tp->plan.calls[run->call_index].call,
                 std::move(ev));
  tp->results[run->call_index] = std::move(text);
  auto then = std::move(run->then);
  then();
}

// Frees what the child `sid` held: its kernels, background processes,
// approvals and read records; ends its session in the store.
void release_child(conv_pointer self, const std::string& sid,
                   const conversation_actor& child, const std::string& reason) {
  auto& st = self->state;
  if (child) {
    self->unlink_from(child); // its exit must not end the parent
    self->send_exit(child, caf::exit_reason::user_shutdown);
  }
  if (st.deps.kernels)
    self->send(st.deps.kernels, dispose_atom_v, sid);
  self->request(st.deps.writer, caf::infinite, end_atom_v, sid, reason)
    .then([](bool) {}, [](caf::error&) {});
  auto svc = st.deps.svc;
  auto job = [svc, sid] {
    if (svc->processes)
      svc->processes->close_session(sid); // waits for the kills
    if (svc->approvals)
      svc->approvals->forget_session(sid);
    if (svc->agent_tools)
      svc->agent_tools->forget_session(sid);
    forget_session_reads(sid);
  };
  if (!svc->pool || !svc->pool->submit(job))
    forget_session_reads(sid);
}

void start_children(conv_pointer self, std::shared_ptr<delegation_run> run);

void child_done(conv_pointer self, std::shared_ptr<delegation_run> run,
                size_t i, const turn_result* res,
                const std::string& failure) {
  auto& t = run->tasks[i];
  if (t.finished)
    return;
  t.finished = true;
  t.running = false;
  if (auto& gate = self->state.deps.svc->approvals)
    gate->channels()->forget(t.session_id);
  t.result = task_entry(i, t, res, failure);
  --run->running;
  ++run->finished;
  auto& st = self->state;
  auto status = t.result.get_string("status");
  if (run->cancelled) {
    status = "cancelled";
    t.result["status"] = status;
  }
  MIBYAN_LOG(info, "delegate",
             st.deps.session_id << ": child " << t.session_id << " ended: "
                                << status);
  std::string reason = status == "interrupted" ? "interrupted"
                                               : "delegation_done";
  if (run->background) {
    reason = status == "ok"            ? "delegation_done"
             : status == "error"       ? "delegation_failed"
             : status == "cancelled"   ? "cancelled"
                                       : "interrupted";
    // A failed task's error survives in its end reason (read back after a
    // restart, conversation_background.cpp).
    if (auto err = t.result.get_string("error"); status == "error" && !err.empty())
      reason += ": " + err.substr(0, 300);
  }
  release_child(self, t.session_id, t.child, reason);
  t.child = nullptr;
  if (run->background) {
    background_child_ended(self, t.session_id, t.goal, t.result,
                           run->cancelled);
    return;
  }
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
  auto& t = run->tasks[i];
  // A call's children end with its turn; background ones run on.
  if (run->interrupted
      || (!run->background && current(self, run->turn) == nullptr)) {
    child_done(self, run, i, nullptr,
               "interrupted before the child started");
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
  turn_request req = run->child_req;
  req.text = child_prompt(t);
  self->request(t.child, caf::infinite, turn_atom_v, std::move(req))
    .then(
      [self, run, i](turn_result& res) {
        child_done(self, run, i, &res, {});
      },
      [self, run, i](caf::error& err) {
        child_done(self, run, i, nullptr,
                   "the child failed: " + error_text(self->system(), err));
      });
}

void start_children(conv_pointer self, std::shared_ptr<delegation_run> run) {
  auto& st = self->state;
  auto limit
    = static_cast<size_t>(st.deps.svc->cfg.delegation.max_concurrent_children);
  while (run->next < run->tasks.size() && run->running < limit
         && !run->interrupted) {
    auto i = run->next++;
    auto& t = run->tasks[i];
    ++run->running;
    t.running = true;
    t.started_ms = now_ms();
    auto parent = st.deps.session_id;
    auto label = t.label.empty() ? std::to_string(i) : t.label;
    t.session_id = parent + "::child::" + std::to_string(t.started_ms) + "."
                   + std::to_string(run->batch) + "." + label;
    if (t.session_id.size() > 128) // the store's id limit
      t.session_id = "child_" + std::to_string(t.started_ms) + "."
                     + std::to_string(run->batch) + "." + label;
    // The child asks through the parent's per-session channels, if any,
    // and inherits the parent's active skill variables.
    if (auto& gate = st.deps.svc->approvals)
      gate->channels()->alias(t.session_id, parent);
    if (st.deps.svc->agent_tools)
      st.deps.svc->agent_tools->inherit_skills(st.tool_session, t.session_id);
    session_meta meta;
    meta.id = t.session_id;
    meta.source = "delegate";
    meta.cwd = st.cwd;
    meta.parent_session_id = parent;
    meta.title = t.goal.substr(0, max_title_chars);
    meta.model = run->child_req.endpoint.model;
    meta.provider = run->child_req.endpoint.provider;
    if (run->background) {
      // The stored record of a background task (its status and summary
      // are read back after a restart, conversation_background.cpp).
      json::value md;
      md["background_task"] = true;
      md["goal"] = t.goal.substr(0, 4000);
      meta.metadata_json = md.dump();
      st.background[t.session_id] = run;
      st.live_children->insert(t.session_id);
      st.deps.svc->background->child_started(st.tool_session);
    }
    self->request(st.deps.writer, caf::infinite, create_atom_v, meta)
      .then([self, run, i](std::string&) { spawn_child(self, run, i); },
            [self, run, i](caf::error& err) {
              child_done(self, run, i, nullptr,
                         "cannot create the child session: "
                           + error_text(self->system(), err));
            });
  }
  if (run->interrupted && run->running == 0)
    deliver_run(self, run);
}

} // namespace

namespace {

// What a task that runs here looks like to action="status".
json::value running_task_status(const std::string& id,
                                const delegation_run& run) {
  json::value v;
  v["task_id"] = id;
  for (auto& t : run.tasks)
    if (t.session_id == id) {
      v["status"] = t.finished ? t.result.get_string("status")
                               : std::string{"running"};
      v["goal"] = t.goal;
      v["elapsed_seconds"] = seconds_since(t.started_ms);
      if (t.finished)
        v["summary"] = t.result.get_string("summary");
    }
  if (run.cancelled)
    v["status"] = "cancelled";
  return v;
}

// delegate_task(action="status", id?) of the running batch's call.
json::value task_status(conv_pointer self, const std::string& id) {
  auto& st = self->state;
  if (id.empty()) {
    json::value out;
    out["tasks"] = json::value::make_array();
    for (auto& [tid, run] : st.background)
      out["tasks"].push_back(running_task_status(tid, *run));
    out["pending_notices"] = static_cast<int64_t>(st.notices.size());
    return out;
  }
  if (auto it = st.background.find(id); it != st.background.end())
    return running_task_status(id, *it->second);
  if (auto stored = stored_task_status(self, id))
    return *stored;
  return error_result("no background task '" + id
                      + "' in this session (delegate_task(action=\"status\") "
                        "lists the running ones)");
}

// delegate_task(action="cancel", id).
json::value task_cancel(conv_pointer self, const std::string& id) {
  auto& st = self->state;
  if (id.empty())
    return error_result("delegate_task(action=\"cancel\") needs the task's "
                        "`id`");
  auto it = st.background.find(id);
  if (it == st.background.end()) {
    if (auto stored = stored_task_status(self, id))
      return error_result("background task '" + id + "' already ended ("
                          + stored->get_string("status")
                          + "); there is nothing to cancel");
    return error_result("no background task '" + id
                        + "' in this session; nothing was cancelled");
  }
  auto run = it->second;
  run->cancelled = true;
  run->interrupted = true;
  for (auto& t : run->tasks)
    if (t.running && t.child)
      self->send(t.child, interrupt_atom_v,
                 std::string{"cancelled by the parent agent"});
  MIBYAN_LOG(info, "delegate",
             st.deps.session_id << ": cancelling background task " << id);
  json::value v;
  v["task_id"] = id;
  v["status"] = "cancelled";
  v["note"] = "The subagent is being stopped; no notice will follow.";
  return v;
}

} // namespace

void background_child_ended(conv_pointer self, const std::string& task_id,
                            const std::string& goal, const json::value& entry,
                            bool cancelled) {
  auto& st = self->state;
  st.background.erase(task_id);
  if (st.live_children->erase(task_id) > 0)
    st.deps.svc->background->child_ended(st.tool_session);
  if (cancelled)
    return;
  auto summary = entry.get_string("summary");
  queue_notice(self, delegate_notice(st.tool_session, task_id, goal,
                                     entry.get_string("status"), summary,
                                     entry.get_string("error")));
}

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
  auto args = json::parse(c.arguments.empty() ? std::string{"{}"}
                                              : c.arguments);
  if (!args || !args.v->is_object()) {
    fail("delegate_task: the arguments are not a JSON object");
    return;
  }
  auto& a = *args.v;
  auto action = a.get_string("action");
  if (action == "status" || action == "cancel") {
    auto id = a.get_string("id");
    auto res = action == "status" ? task_status(self, id)
                                  : task_cancel(self, id);
    t.results[idx] = res.dump();
    then();
    return;
  }
  if (!action.empty() && action != "start") {
    fail("delegate_task: unknown action '" + action
         + "' (start, status or cancel)");
    return;
  }
  // At most max_concurrent_children delegate_task calls that start work
  // per message.
  size_t ordinal = 0;
  for (size_t i = 0; i < idx; ++i)
    if (t.plan.calls[i].call.name == "delegate_task") {
      auto other = json::parse_members(t.plan.calls[i].call.arguments,
                                       {"action"});
      auto act = other && other.v->is_object()
                   ? other.v->get_string("action")
                   : std::string{};
      if (act != "status" && act != "cancel")
        ++ordinal;
    }
  auto& cfg = st.deps.svc->cfg;
  auto cap = cfg.delegation.max_concurrent_children;
  if (static_cast<int64_t>(ordinal) >= cap) {
    fail("skipped: at most " + std::to_string(cap)
         + " delegate_task calls per message; put several tasks into one "
           "call's `tasks` instead");
    return;
  }
  std::vector<delegation_run::task> tasks;
  if (auto list = a.find("tasks"); list != nullptr && list->is_array()
                                   && list->size() > 0) {
    for (auto& x : list->as_array()) {
      delegation_run::task task;
      if (x.is_object()) {
        task.goal = x.get_string("goal");
        task.context = x.get_string("context");
      } else if (x.is_string()) {
        task.goal = x.as_string();
      }
      if (strings::trim(task.goal).empty()) {
        fail("delegate_task: every task needs a non-empty goal");
        return;
      }
      tasks.push_back(std::move(task));
    }
  } else if (!strings::trim(a.get_string("goal")).empty()) {
    delegation_run::task task;
    task.goal = a.get_string("goal");
    task.context = a.get_string("context");
    tasks.push_back(std::move(task));
  } else {
    fail("delegate_task needs a `goal` or a non-empty `tasks` list");
    return;
  }
  // The children's tools (docs/tools.md, "delegate_task"): the call's
  // toolsets, else delegation.default_toolsets, never beyond what this
  // turn offers, minus delegation.blocked_tools.
  std::vector<std::string> sets;
  if (auto ts = a.find("toolsets"); ts != nullptr && !ts->is_null()) {
    if (!ts->is_array()) {
      fail("delegate_task: `toolsets` must be a list of toolset names");
      return;
    }
    for (auto& x : ts->as_array()) {
      if (!x.is_string() || strings::trim(x.as_string()).empty()) {
        fail("delegate_task: `toolsets` must be a list of toolset names");
        return;
      }
      sets.push_back(strings::trim(x.as_string()));
    }
  }
  if (sets.empty())
    sets = cfg.delegation.default_toolsets;
  auto offered = offered_tool_names(st.deps.svc->toolsets.get(),
                                    st.deps.svc->tools, cfg, sets);
  if (!offered) {
    fail("delegate_task: " + offered.error);
    return;
  }
  turn_request child;
  child.max_iterations = cfg.delegation.max_iterations;
  child.toolsets = sets;
  child.blocked_tools = cfg.delegation.blocked_tools;
  for (auto& name : *offered)
    if (t.valid.count(name) == 0)
      child.blocked_tools.push_back(name);
  child.stream = false;
  child.provider = t.p.req.provider;
  child.endpoint = t.p.req.endpoint;
  if (a.get_bool("background", false)) {
    // Background: each task runs on its own; the call answers now.
    auto limit = cfg.delegation.max_background_children;
    auto running = static_cast<int64_t>(st.background.size());
    if (running + static_cast<int64_t>(tasks.size()) > limit) {
      fail("delegate_task: at most " + std::to_string(limit)
           + " background subagents may run at once in a session ("
           + std::to_string(running)
           + " running now; delegation.max_background_children); wait for "
             "one to finish or cancel one");
      return;
    }
    json::value out;
    out["background"] = true;
    out["tasks"] = json::value::make_array();
    for (size_t k = 0; k < tasks.size(); ++k) {
      auto run = std::make_shared<delegation_run>();
      run->background = true;
      run->turn = t.id;
      run->batch = t.batch;
      run->call_index = idx;
      run->started_ms = now_ms();
      run->child_req = child;
      tasks[k].label = std::to_string(idx) + "-" + std::to_string(k);
      run->tasks.push_back(std::move(tasks[k]));
      start_children(self, run);
      json::value e;
      e["task_id"] = run->tasks[0].session_id;
      e["goal"] = run->tasks[0].goal;
      e["status"] = "running";
      out["tasks"].push_back(std::move(e));
    }
    out["note"] = "The subagents run in the background. Each one's summary "
                  "is delivered to you at the start of the next turn after "
                  "it finishes; delegate_task(action=\"status\", id=...) "
                  "checks one, action=\"cancel\" stops one.";
    MIBYAN_LOG(info, "delegate",
               st.deps.session_id << ": " << tasks.size()
                                  << " background task(s) started");
    t.results[idx] = out.dump();
    then();
    return;
  }
  auto run = std::make_shared<delegation_run>();
  run->tasks = std::move(tasks);
  run->child_req = std::move(child);
  // The child's tool events go straight to the parent's sink, marked with
  // their depth (shown indented).
  run->child_req.sink = t.p.req.sink;
  run->turn = t.id;
  run->batch = t.batch;
  run->call_index = idx;
  run->started_ms = now_ms();
  run->then = std::move(then);
  t.delegations.push_back(run);
  tool_event ev;
  ev.args_json = c.arguments;
  ev.tasks = static_cast<int32_t>(run->tasks.size());
  delegate_event(self, t, c, std::move(ev));
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
