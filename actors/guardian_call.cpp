#include "actors/guardian_call.hpp"

#include <future>
#include <memory>

#include "caf/all.hpp"

namespace mibyan {

guardian_reply call_guardian(caf::actor_system& sys, provider_actor provider,
                             const std::string& system_prompt,
                             const std::string& user_prompt,
                             std::chrono::milliseconds timeout,
                             const std::atomic<bool>* cancelled) {
  static std::atomic<uint64_t> seq{0};
  if (!provider)
    return {false, "", "no reviewer model is configured"};
  chat_request req;
  req.request_id = "guardian-" + std::to_string(++seq);
  req.stream = false;
  chat_message sys_msg;
  sys_msg.role = "system";
  sys_msg.content = system_prompt;
  chat_message user_msg;
  user_msg.role = "user";
  user_msg.content = user_prompt;
  req.messages = {std::move(sys_msg), std::move(user_msg)};
  auto id = req.request_id;
  auto done = std::make_shared<std::promise<guardian_reply>>();
  auto answer = done->get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    self->request(provider, timeout, complete_atom_v, req)
      .then(
        [=](chat_response& res) {
          if (!res.error.empty())
            done->set_value({false, "", res.error});
          else
            done->set_value({true, res.content, ""});
        },
        [=](caf::error& err) {
          done->set_value({false, "", self->system().render(err)});
        });
  });
  auto deadline = std::chrono::steady_clock::now() + timeout
                  + std::chrono::milliseconds(500);
  while (answer.wait_for(std::chrono::milliseconds(50))
         != std::future_status::ready) {
    bool stop = cancelled != nullptr && cancelled->load();
    if (stop || std::chrono::steady_clock::now() > deadline) {
      caf::anon_send(provider, cancel_atom_v, id);
      return {false, "", stop ? "cancelled" : "the reviewer timed out"};
    }
  }
  return answer.get();
}

} // namespace mibyan
