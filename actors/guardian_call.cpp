#include "actors/guardian_call.hpp"

#include <future>

#include "caf/all.hpp"

#include "actors/error_mapping.hpp"

namespace mibyan {

struct guardian_relay::waiting {
  std::mutex mtx;
  std::map<std::string, std::promise<guardian_reply>> calls;
  std::atomic<bool> stopped{false};

  void fulfil(const std::string& id, guardian_reply r) {
    std::lock_guard<std::mutex> guard{mtx};
    auto it = calls.find(id);
    if (it == calls.end())
      return; // the caller gave up
    it->second.set_value(std::move(r));
    calls.erase(it);
  }
};

guardian_relay::guardian_relay(caf::actor_system& sys)
  : waiting_(std::make_shared<waiting>()) {
  auto w = waiting_;
  relay_ = sys.spawn([w](caf::event_based_actor* self) -> caf::behavior {
    return {
      [=](complete_atom, const caf::actor& prov, chat_request& req) {
        auto id = req.request_id;
        self->request(caf::actor_cast<provider_actor>(prov), caf::infinite,
                      complete_atom_v, std::move(req))
          .then(
            [=](chat_response& res) {
              if (!res.error.empty())
                w->fulfil(id, guardian_reply::failure(status_code::unavailable,
                                                      res.error));
              else
                w->fulfil(id, guardian_reply{res.content});
            },
            [=](caf::error& err) {
              w->fulfil(id, guardian_reply::failure(
                              to_status(err).code,
                              self->system().render(err)));
            });
      },
    };
  });
}

void guardian_relay::stop() {
  waiting_->stopped = true;
  caf::anon_send_exit(relay_, caf::exit_reason::user_shutdown);
}

guardian_reply guardian_relay::ask(const provider_actor& provider,
                                   const std::string& system_prompt,
                                   const std::string& user_prompt,
                                   std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* cancelled) {
  chat_request req;
  chat_message sys_msg;
  sys_msg.role = "system";
  sys_msg.content = system_prompt;
  chat_message user_msg;
  user_msg.role = "user";
  user_msg.content = user_prompt;
  req.messages = {std::move(sys_msg), std::move(user_msg)};
  return ask(provider, std::move(req), timeout, cancelled);
}

guardian_reply guardian_relay::ask(const provider_actor& provider,
                                   chat_request req,
                                   std::chrono::milliseconds timeout,
                                   const std::atomic<bool>* cancelled) {
  static std::atomic<uint64_t> seq{0};
  if (!provider)
    return guardian_reply::failure(status_code::unavailable,
                                   "no reviewer model is configured");
  if (waiting_->stopped)
    return guardian_reply::failure(status_code::unavailable,
                                   "the runtime is shutting down");
  req.request_id = "guardian-" + std::to_string(++seq);
  req.stream = false;
  auto id = req.request_id;
  std::future<guardian_reply> answer;
  {
    std::lock_guard<std::mutex> guard{waiting_->mtx};
    answer = waiting_->calls[id].get_future();
  }
  caf::anon_send(relay_, complete_atom_v,
                 caf::actor_cast<caf::actor>(provider), std::move(req));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (answer.wait_for(std::chrono::milliseconds(50))
         != std::future_status::ready) {
    bool stop = (cancelled != nullptr && cancelled->load())
                || waiting_->stopped;
    if (stop || std::chrono::steady_clock::now() >= deadline) {
      {
        std::lock_guard<std::mutex> guard{waiting_->mtx};
        waiting_->calls.erase(id);
      }
      caf::anon_send(provider, cancel_atom_v, id);
      return stop ? guardian_reply::failure(status_code::cancelled,
                                            "cancelled")
                  : guardian_reply::failure(status_code::timeout,
                                            "the reviewer timed out");
    }
  }
  return answer.get();
}

} // namespace mibyan
