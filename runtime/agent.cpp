// The facade agent (include/mibyan/agent.hpp): a FIFO of turns on top of
// runtime::run_turn_async. At most one turn of an agent is in flight; the
// next one starts from the previous one's completion, so turns keep call
// order without a thread per agent. CAF-free.
#include "mibyan/agent.hpp"

#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>

#include "storage/session_id.hpp"

namespace mibyan {

struct agent::impl : std::enable_shared_from_this<agent::impl> {
  struct pending {
    std::string message;
    turn_options opts;
    std::function<void(turn_result)> done;
  };

  runtime* rt = nullptr;
  agent_config cfg;
  std::string session_id;

  std::mutex mtx; // guards the members below
  std::deque<pending> queue;
  bool running = false;
  bool closed = false;

  // Starts the front turn if none runs. Called without the lock held.
  void pump() {
    pending next;
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (running || closed || queue.empty())
        return;
      running = true;
      next = std::move(queue.front());
      queue.pop_front();
    }
    turn_call call;
    call.session_id = session_id;
    call.prompt = std::move(next.message);
    call.provider = cfg.provider;
    call.max_iterations = next.opts.max_iterations;
    call.toolsets = cfg.toolsets;
    call.stream = next.opts.stream;
    call.source = cfg.source;
    if (cfg.on_text || cfg.on_reasoning) {
      auto on_text = cfg.on_text;
      auto on_reasoning = cfg.on_reasoning;
      call.on_delta = [on_text, on_reasoning](const std::string& kind,
                                              const std::string& text) {
        if (kind == "text" && on_text)
          on_text(text);
        else if (kind == "reasoning" && on_reasoning)
          on_reasoning(text);
      };
    }
    if (cfg.on_tool_start || cfg.on_tool_end) {
      auto on_start = cfg.on_tool_start;
      auto on_end = cfg.on_tool_end;
      call.on_tool = [on_start, on_end](const tool_event& ev) {
        if (ev.what == tool_event::phase::start) {
          if (on_start)
            on_start(ev);
        } else if (on_end) {
          on_end(ev);
        }
      };
    }
    auto self = shared_from_this();
    auto done = std::move(next.done);
    rt->run_turn_async(call, [self, done](turn_result r) {
      if (r.session_id.empty())
        r.session_id = self->session_id;
      if (done)
        done(std::move(r));
      bool closed;
      {
        std::lock_guard<std::mutex> guard{self->mtx};
        self->running = false;
        closed = self->closed;
      }
      if (closed)
        self->rt->close_session(self->session_id);
      else
        self->pump();
    });
  }
};

agent::agent(runtime& rt, agent_config cfg) : impl_(std::make_shared<impl>()) {
  impl_->rt = &rt;
  impl_->session_id = cfg.session_id.empty() ? new_session_id()
                                             : cfg.session_id;
  impl_->cfg = std::move(cfg);
}

agent::~agent() {
  close();
}

std::future<turn_result> agent::run(std::string message, turn_options opts) {
  auto result = std::make_shared<std::promise<turn_result>>();
  auto future = result->get_future();
  run(std::move(message), opts,
      [result](turn_result r) { result->set_value(std::move(r)); });
  return future;
}

void agent::run(std::string message, turn_options opts,
                std::function<void(turn_result)> done) {
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (!impl_->closed) {
      impl_->queue.push_back({std::move(message), opts, std::move(done)});
      done = nullptr;
    }
  }
  if (done) {
    turn_result r;
    r.session_id = impl_->session_id;
    r.error = "the agent is closed";
    done(std::move(r));
    return;
  }
  impl_->pump();
}

void agent::interrupt(const std::string& reason) {
  impl_->rt->interrupt(impl_->session_id, reason);
}

void agent::close() {
  std::deque<impl::pending> dropped;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (impl_->closed)
      return;
    impl_->closed = true;
    dropped.swap(impl_->queue);
  }
  for (auto& p : dropped) {
    turn_result r;
    r.session_id = impl_->session_id;
    r.error = "the agent was closed before the turn started";
    if (p.done)
      p.done(std::move(r));
  }
  // A running turn is interrupted and ends (persisted) first; its
  // completion then ends the session (see pump). Never blocks.
  bool was_running;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    was_running = impl_->running;
  }
  if (was_running)
    impl_->rt->interrupt(impl_->session_id, "the agent was closed");
  else
    impl_->rt->close_session(impl_->session_id);
}

const std::string& agent::session_id() const {
  return impl_->session_id;
}

} // namespace mibyan
