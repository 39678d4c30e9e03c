#include "runtime/mcp_wiring.hpp"

#include <thread>

#include "caf/all.hpp"

#include "actors/mcp_server.hpp"
#include "actors/services.hpp"
#include "base/log.hpp"
#include "base/redact_slot.hpp"
#include "tools/mcp/mcp_oauth_client.hpp"
#include "runtime/runtime_impl.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/mcp/mcp_elicitation.hpp"
#include "tools/mcp/mcp_tools.hpp"

namespace mibyan {

void start_mcp(runtime_services& svc,
               std::vector<script_tool_spec>& script_host_tools) {
  if (svc.cfg.mcp_servers.empty())
    return;
  // OAuth tokens of HTTP servers join the redactor as soon as they are
  // loaded or obtained (docs/mcp.md, "Authorization").
  if (svc.redact)
    mcp_oauth_client::set_secret_sink(
      [slot = std::weak_ptr<redactor_slot>(svc.redact)](
        const std::string& name, const std::string& value) {
        if (auto s = slot.lock())
          s->add_literal(name, value);
      });
  svc.mcp = std::make_shared<mcp_manager>(svc.cfg, svc.http.get());
  // Roots: the working directory of the session whose call is in flight
  // (mcp_session::roots_result), else the runtime's working directory; a
  // server's `roots` list replaces both. Elicitation: the calling session's clarify channel (the
  // chat, the pending registry behind the dashboard, an ACP or MCP-serve
  // client), one question per field; declined where the session has none
  // (serve without clarify.http, batch, cron).
  svc.mcp->set_roots_provider([cwd = svc.default_cwd] {
    return std::vector<std::string>{cwd};
  });
  std::weak_ptr<agent_tool_state> agent = svc.agent_tools;
  auto per_question = std::chrono::seconds{svc.cfg.clarify.timeout};
  svc.mcp->set_elicitation_handler(
    [agent, per_question](const mcp_elicitation_request& r) {
      auto a = agent.lock();
      if (!a)
        return mcp_elicit_result("decline");
      bool serialised = true;
      auto ask = a->clarify_for(r.session_id, &serialised);
      if (!ask)
        return mcp_elicit_result("decline");
      std::unique_lock<std::mutex> one_at_a_time{a->clarify_mutex(),
                                                 std::defer_lock};
      if (serialised) {
        // Questions of one channel never interleave; give up when the
        // call that caused the request ends.
        auto until = std::chrono::steady_clock::now() + r.timeout;
        while (!one_at_a_time.try_lock()) {
          if (r.cancelled->load()
              || std::chrono::steady_clock::now() >= until)
            return mcp_elicit_result("cancel");
          std::this_thread::sleep_for(std::chrono::milliseconds{20});
        }
      }
      return mcp_elicit_by_questions(r, ask, per_question);
    });
  svc.mcp->start();
  svc.mcp->register_tools(svc.tools);
  if (svc.cfg.code_execution.mcp_in_scripts)
    for (auto& spec : svc.mcp->script_specs())
      script_host_tools.push_back(std::move(spec));
}

namespace {

// Text of an MCP content block (or array of them).
std::string content_text(const json::value& content) {
  if (content.is_array()) {
    std::string out;
    for (auto& c : content.as_array()) {
      auto t = content_text(c);
      if (!out.empty() && !t.empty())
        out += "\n";
      out += t;
    }
    return out;
  }
  if (!content.is_object())
    return {};
  auto type = content.get_string("type", "");
  if (type == "text")
    return content.get_string("text", "");
  return "[" + type + " content omitted]";
}

} // namespace

void wire_mcp(runtime_impl& p) {
  auto& svc = p.svc;
  if (!svc->mcp)
    return;
  for (auto& s : svc->mcp->sessions())
    p.mcp_actors.push_back(spawn_mcp_server(*p.sys, svc, s));
  bool sampling = false;
  for (auto& s : svc->cfg.mcp_servers)
    sampling = sampling || (s.enabled && s.sampling.enabled);
  if (!sampling)
    return;
  auto settings = make_provider_settings(svc->cfg);
  settings.clock = svc->clock;
  if (!settings.main.ok()) {
    MIBYAN_LOG(warning, "mcp", "sampling is enabled but no model is "
                               "configured; servers' sampling requests "
                               "will be refused");
    return;
  }
  auto sampler = spawn_provider(*p.sys, svc->http, std::move(settings));
  p.mcp_actors.push_back(caf::actor_cast<caf::actor>(sampler));
  auto* relay = p.relay.get();
  const options* cfg = &svc->cfg;
  svc->mcp->set_sampling_handler(
    [relay, sampler, cfg](const std::string& server, const json::value& params,
                          std::chrono::milliseconds timeout)
      -> result<json::value> {
      const mcp_sampling_options* lim = nullptr;
      for (auto& s : cfg->mcp_servers)
        if (s.name == server)
          lim = &s.sampling;
      if (lim == nullptr || !lim->enabled)
        return result<json::value>::failure(status_code::permission_denied,
                                            "sampling is disabled");
      chat_request req;
      req.model = lim->model;
      auto model = req.model.empty() ? cfg->model.default_model : req.model;
      if (!lim->allowed_models.empty()
          && std::find(lim->allowed_models.begin(), lim->allowed_models.end(),
                       model)
               == lim->allowed_models.end())
        return result<json::value>::failure(
          status_code::permission_denied,
          "model '" + model + "' is not in allowed_models");
      auto asked = params.get_int("maxTokens", lim->max_tokens_cap);
      req.max_tokens = std::max<int64_t>(1, std::min(asked,
                                                     lim->max_tokens_cap));
      if (auto sys = params.get_string("systemPrompt", ""); !sys.empty()) {
        chat_message m;
        m.role = "system";
        m.content = sys;
        req.messages.push_back(std::move(m));
      }
      if (auto msgs = params.find("messages");
          msgs != nullptr && msgs->is_array())
        for (auto& x : msgs->as_array()) {
          if (!x.is_object())
            continue;
          chat_message m;
          m.role = x.get_string("role", "user") == "assistant" ? "assistant"
                                                                : "user";
          if (auto c = x.find("content"))
            m.content = content_text(*c);
          req.messages.push_back(std::move(m));
        }
      if (req.messages.empty())
        return result<json::value>::failure(status_code::invalid_argument,
                                            "no messages to sample");
      auto reply = relay->ask(sampler, std::move(req), timeout, nullptr);
      if (!reply.ok())
        return result<json::value>::failure(status_code::unavailable,
                                            reply.error);
      json::value content;
      content["type"] = "text";
      content["text"] = *reply;
      json::value out;
      out["role"] = "assistant";
      out["content"] = std::move(content);
      out["model"] = model;
      out["stopReason"] = "endTurn";
      return out;
    });
}

} // namespace mibyan
