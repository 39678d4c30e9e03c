#include "actors/provider.hpp"

#include <map>
#include <memory>
#include <optional>

#include "caf/all.hpp"

#include "messages/type_ids.hpp"
#include "providers/anthropic_codec.hpp"
#include "providers/openai_codec.hpp"
#include "providers/wire_format.hpp"
#include "base/http_client.hpp"
#include "base/log.hpp"
#include "base/runtime_metrics.hpp"

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The actor's private interface: its public one plus the curl thread's
// reports and its own timers.
//   http_head: transfer, status, content type, Retry-After
//   http_data: transfer, body bytes
//   http_done: transfer, error ("" = complete), timed out, status, capped
//              (the body reached provider.max_response_bytes)
//   retry / stale: request id, attempt generation
using provider_impl_actor = provider_actor::extend<
  caf::reacts_to<http_head_atom, uint64_t, int32_t, std::string,
                 std::string>,
  caf::reacts_to<http_data_atom, uint64_t, std::string>,
  caf::reacts_to<http_done_atom, uint64_t, std::string, bool, int32_t,
                 bool>,
  caf::reacts_to<retry_atom, std::string, uint64_t>,
  caf::reacts_to<stale_atom, std::string, uint64_t>>;

// One call in flight.
// A tool list as received (chat_request::tools_json): parsed, and
// rendered for the OpenAI wire format. Immutable once made; calls with the
// same list share it.
struct tool_list {
  json::value tools;
  std::string openai_json; // openai::render_tools(tools)
};

struct call_state {
  chat_request req;
  std::shared_ptr<const tool_list> tools;
  caf::typed_response_promise<chat_response> rp;
  // Which endpoint: 0 = main, i > 0 = fallbacks[i - 1].
  size_t endpoint = 0;
  int attempt = 0;        // attempts on the current endpoint
  int total_attempts = 0; // over all endpoints
  uint64_t gen = 0;       // bumped per attempt; stale timers check it
  uint64_t transfer = 0;  // 0 = none in flight
  http_request_id http_id = 0;
  std::unique_ptr<response_decoder> decoder;
  int status = 0;
  std::string retry_after;
  bool stale = false;     // the current transfer was aborted as stale
  bool emitted = false;   // deltas went to the sink since the last restart
  clock_type::time_point last_activity;
  std::vector<std::string> notes; // why earlier endpoints gave up
  clock_type::time_point started;
};

struct provider_state {
  std::shared_ptr<http_client> http;
  provider_settings cfg;
  std::unique_ptr<retry_policy> policy;
  std::map<std::string, call_state> calls;   // by request id
  std::map<uint64_t, std::string> transfers; // transfer -> request id
  uint64_t next_transfer = 1;
  // The last tool list seen and its text: an agent loop sends the same
  // list with every model call of a turn, so it is parsed and rendered
  // once, not per request.
  std::string tools_text;
  std::shared_ptr<const tool_list> tools;

  ~provider_state() {
    for (auto& [id, call] : calls) {
      if (call.transfer != 0 && http)
        http->cancel(call.http_id);
      call.rp.deliver(caf::make_error(
        ec::unavailable, "the provider connection shut down while request "
                         + id + " was running"));
    }
  }

  static const char* name;
};

const char* provider_state::name = "provider";

using provider_pointer = provider_impl_actor::stateful_pointer<provider_state>;

const provider_endpoint& endpoint_of(provider_pointer self,
                                     const call_state& call) {
  auto& cfg = self->state.cfg;
  return call.endpoint == 0 ? *cfg.main : *cfg.fallbacks[call.endpoint - 1];
}

std::string model_for(const provider_endpoint& ep, const call_state& call) {
  // The main endpoint serves the requested model; a fallback endpoint its
  // configured model (model.fallback_model) unless it has none.
  if (call.endpoint == 0)
    return call.req.model.empty() ? ep.model : call.req.model;
  return ep.model.empty() ? call.req.model : ep.model;
}

std::string build_body(const provider_endpoint& ep, const call_state& call) {
  auto& req = call.req;
  auto model = model_for(ep, call);
  if (ep.format == wire_format::anthropic) {
    anthropic::request_options o;
    o.model = model;
    if (call.tools)
      o.tools = call.tools->tools;
    o.stream = req.stream;
    o.max_tokens = req.max_tokens;
    o.reasoning_effort = req.reasoning_effort;
    return anthropic::build_request(o, req.messages);
  }
  openai::request_options o;
  o.model = model;
  if (call.tools)
    o.tools_json = call.tools->openai_json;
  o.stream = req.stream;
  if (req.max_tokens > 0) {
    o.max_tokens = req.max_tokens;
    o.max_completion_tokens = openai::wants_max_completion_tokens(ep.base_url,
                                                                  model);
  }
  if (ep.provider == "openrouter")
    o.reasoning_effort = req.reasoning_effort;
  o.echo_reasoning_content = ep.provider == "deepseek";
  return openai::build_request(o, req.messages);
}

void send_delta(call_state& call, const char* kind, std::string_view text) {
  if (!call.req.sink || text.empty())
    return;
  call.emitted = true;
  // Typed actors may not send() to untyped handles; the sink needs no
  // sender anyway. Order with the final response is kept (same thread,
  // same mailbox).
  caf::anon_send(call.req.sink, delta_atom_v, call.req.request_id,
                 std::string{kind}, std::string{text});
}

void arm_stale_timer(provider_pointer self, const call_state& call,
                     milliseconds wait) {
  self->delayed_send(self, wait, stale_atom_v, call.req.request_id,
                     call.gen);
}

void start_attempt(provider_pointer self, call_state& call) {
  auto& st = self->state;
  auto& ep = endpoint_of(self, call);
  ++call.attempt;
  ++call.total_attempts;
  ++call.gen;
  call.decoder.reset();
  call.status = 0;
  call.retry_after.clear();
  call.stale = false;
  if (call.emitted && call.req.sink) {
    caf::anon_send(call.req.sink, delta_atom_v, call.req.request_id,
                   std::string{"restart"},
                   "attempt " + std::to_string(call.total_attempts) + " on "
                     + ep.provider);
    call.emitted = false;
  }
  http_request hr;
  hr.method = "POST";
  hr.url = ep.request_url();
  hr.headers = ep.headers(call.req.stream);
  hr.body = build_body(ep, call);
  hr.connect_timeout = st.cfg.connect_timeout;
  hr.total_timeout = st.cfg.request_timeout;
  // Never follow redirects: a redirect would carry the key elsewhere.
  hr.follow_redirects = false;
  hr.user_agent = st.cfg.user_agent;
  // The curl thread stops the body at the cap, so neither the mailbox nor
  // the decoder ever holds more than this (docs/security.md).
  hr.max_body_bytes = st.cfg.max_response_bytes;
  auto seq = st.next_transfer++;
  auto me = caf::actor_cast<provider_impl_actor>(self);
  http_callbacks cb;
  cb.on_headers = [me, seq](long status, const http_headers& headers) {
    std::string ctype;
    std::string retry_after;
    if (auto v = find_header(headers, "content-type"))
      ctype = *v;
    if (auto v = find_header(headers, "retry-after"))
      retry_after = *v;
    caf::anon_send(me, http_head_atom_v, seq, static_cast<int32_t>(status),
                   std::move(ctype), std::move(retry_after));
  };
  cb.on_data = [me, seq](std::string_view chunk) {
    caf::anon_send(me, http_data_atom_v, seq, std::string{chunk});
    return true;
  };
  cb.on_done = [me, seq](const http_response_summary& s) {
    caf::anon_send(me, http_done_atom_v, seq, s.error, s.timed_out,
                   static_cast<int32_t>(s.status), s.capped);
  };
  call.transfer = seq;
  st.transfers.emplace(seq, call.req.request_id);
  call.last_activity = st.cfg.clock->steady_now();
  call.http_id = st.http->submit(std::move(hr), std::move(cb));
  MIBYAN_LOG(debug, "provider", "request " << call.req.request_id
             << " attempt " << call.total_attempts << " -> " << ep.provider
             << " " << ep.request_url());
  if (call.req.stream && st.cfg.stream_idle_timeout.count() > 0)
    arm_stale_timer(self, call, st.cfg.stream_idle_timeout);
}

void finish_call(provider_pointer self, const std::string& id,
                 chat_response resp) {
  auto& st = self->state;
  auto i = st.calls.find(id);
  if (i == st.calls.end())
    return;
  auto& call = i->second;
  auto& ep = endpoint_of(self, call);
  resp.provider = ep.provider;
  resp.attempts = call.total_attempts;
  // Every model call that got an answer or gave up ends here
  // (docs/metrics.md); a cancelled one in the cancel handler.
  metrics::count_provider_call(
    ep.provider, resp.error.empty() ? "ok" : "error",
    std::chrono::duration<double>(st.cfg.clock->steady_now() - call.started).count());
  const auto& u = resp.usage;
  metrics::count_tokens(ep.provider, model_for(ep, call), u.input_tokens,
                        u.output_tokens, u.cache_read_tokens,
                        u.cache_write_tokens, u.reasoning_tokens);
  call.rp.deliver(std::move(resp));
  st.calls.erase(i);
}

// Returns the next usable endpoint index after `from`, noting skipped ones.
std::optional<size_t> next_endpoint(provider_pointer self, call_state& call) {
  auto& fbs = self->state.cfg.fallbacks;
  for (size_t i = call.endpoint; i < fbs.size(); ++i) {
    if (fbs[i].ok())
      return i + 1;
    call.notes.push_back("fallback " + std::to_string(i + 1)
                         + " not tried: " + fbs[i].error);
  }
  return std::nullopt;
}

std::string seconds_text(milliseconds ms) {
  auto tenths = (ms.count() + 50) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10)
         + " s";
}

void attempt_done(provider_pointer self, call_state& call,
                  const std::string& transport_error, bool timed_out,
                  int status, bool capped) {
  auto& st = self->state;
  auto& ep = endpoint_of(self, call);
  auto id = call.req.request_id;
  chat_response resp;
  attempt_facts facts;
  if (capped) {
    // Not retried and no fallback: the same request would most likely
    // produce the same oversized answer again.
    call.decoder.reset();
    resp.error = "the provider's response exceeded provider.max_response_bytes ("
                 + std::to_string(st.cfg.max_response_bytes)
                 + " bytes); the request was stopped";
    resp.retryable = false;
    resp.http_status = status;
    std::string summary = "request failed on '" + ep.provider
                          + "': " + resp.error;
    for (auto i = call.notes.rbegin(); i != call.notes.rend(); ++i)
      summary += "; before that: " + *i;
    resp.error = std::move(summary);
    MIBYAN_LOG(warning, "provider", "request " << id << ": " << resp.error);
    metrics::count_provider_error(ep.provider, "response_too_large");
    finish_call(self, id, std::move(resp));
    return;
  }
  if (call.stale) {
    facts.transport_error = "stream stalled";
    facts.timed_out = true;
    resp.error = "stream stalled: no data for "
                 + seconds_text(st.cfg.stream_idle_timeout)
                 + " (provider.stream_idle_timeout)";
    resp.retryable = true;
    resp.http_status = call.status;
  } else if (!transport_error.empty()) {
    facts.transport_error = transport_error;
    facts.timed_out = timed_out;
    resp.error = (timed_out ? "request timed out: " : "transport error: ")
                 + transport_error;
    resp.retryable = true;
    resp.http_status = status;
  } else if (!call.decoder) {
    facts.transport_error = "no response";
    resp.error = "transport error: the server sent no response";
    resp.retryable = true;
  } else {
    resp = call.decoder->finish();
    call.decoder.reset();
    facts.status = call.status;
    resp.http_status = call.status;
    if (!resp.error.empty()) {
      facts.message = resp.error;
      facts.invalid_body = call.status >= 200 && call.status < 300;
      facts.body_retryable = resp.retryable;
    }
  }
  auto decision = classify(facts);
  if (decision.cls == failure_class::none) {
    finish_call(self, id, std::move(resp));
    return;
  }
  MIBYAN_LOG(info, "provider", "request " << id << " attempt "
             << call.total_attempts << " on " << ep.provider << " failed ("
             << to_string(decision.cls) << "): " << resp.error);
  metrics::count_provider_error(ep.provider, to_string(decision.cls));
  if (decision.retry && st.policy->can_retry(call.attempt)) {
    metrics::count_provider_retry(ep.provider, to_string(decision.cls));
    // An HTTP-date Retry-After counts from the injected wall clock.
    auto ra = parse_retry_after(
      call.retry_after,
      std::chrono::system_clock::time_point{
        milliseconds{st.cfg.clock->wall_ms()}});
    auto wait = st.policy->delay(call.attempt, ra, decision.slow);
    ++call.gen; // a stale timer of the finished attempt must not fire
    self->delayed_send(self, wait, retry_atom_v, id, call.gen);
    return;
  }
  std::string summary;
  if (decision.retry)
    summary = "API call failed after " + std::to_string(call.attempt)
              + (call.attempt == 1 ? " attempt" : " attempts") + " on '"
              + ep.provider + "': " + resp.error;
  else
    summary = "'" + ep.provider + "' refused the request ("
              + to_string(decision.cls) + "): " + resp.error;
  if (decision.fallback) {
    if (auto next = next_endpoint(self, call)) {
      metrics::count_provider_fallback(ep.provider);
      call.notes.push_back(summary);
      call.endpoint = *next;
      call.attempt = 0;
      MIBYAN_LOG(warning, "provider", "request " << id << ": " << summary
                 << "; falling back to "
                 << endpoint_of(self, call).provider);
      start_attempt(self, call);
      return;
    }
  }
  for (auto i = call.notes.rbegin(); i != call.notes.rend(); ++i)
    summary += "; before that: " + *i;
  resp.error = std::move(summary);
  // Retryable once more only if the failure was transient: the caller may
  // try again later, it must not loop.
  resp.retryable = decision.retry;
  finish_call(self, id, std::move(resp));
}

// Looks up the call that owns transfer `seq`; nullptr when it is gone
// (cancelled) or superseded.
call_state* call_of_transfer(provider_pointer self, uint64_t seq) {
  auto& st = self->state;
  auto t = st.transfers.find(seq);
  if (t == st.transfers.end())
    return nullptr;
  auto c = st.calls.find(t->second);
  if (c == st.calls.end() || c->second.transfer != seq)
    return nullptr;
  return &c->second;
}

caf::error request_error(ec code, std::string text) {
  return caf::make_error(code, std::move(text));
}

provider_impl_actor::behavior_type
provider_impl(provider_pointer self, std::shared_ptr<http_client> http,
              provider_settings cfg) {
  auto& st = self->state;
  st.http = std::move(http);
  st.policy = std::make_unique<retry_policy>(cfg.retry, cfg.random);
  st.cfg = std::move(cfg);
  return {
    [=](complete_atom, chat_request& req) -> caf::result<chat_response> {
      auto& st = self->state;
      if (!st.cfg.main.ok())
        return request_error(ec::config_invalid, st.cfg.main.error);
      if (!st.http)
        return request_error(ec::unavailable, "no HTTP client");
      if (req.request_id.empty())
        return request_error(ec::invalid_request,
                             "chat_request.request_id is empty");
      if (st.calls.count(req.request_id) != 0)
        return request_error(ec::invalid_request,
                             "request id '" + req.request_id
                               + "' is already in flight on this "
                                 "connection");
      if (req.model.empty() && st.cfg.main->model.empty())
        return request_error(ec::invalid_request,
                             "no model: the request names none and "
                             "model.default is not set");
      std::shared_ptr<const tool_list> tools;
      if (!req.tools_json.empty() && st.tools
          && req.tools_json == st.tools_text) {
        tools = st.tools;
      } else if (!req.tools_json.empty()) {
        auto parsed = json::parse(req.tools_json);
        if (!parsed || !(parsed.v->is_array() || parsed.v->is_null()))
          return request_error(ec::invalid_request,
                               "chat_request.tools_json must be a JSON "
                               "array"
                               + (parsed ? std::string{}
                                         : ": " + parsed.error));
        auto made = std::make_shared<tool_list>();
        made->openai_json = openai::render_tools(*parsed.v);
        made->tools = std::move(*parsed.v);
        tools = made;
        st.tools = std::move(made);
        st.tools_text = req.tools_json;
      }
      auto id = req.request_id;
      auto& call = st.calls[id];
      call.started = st.cfg.clock->steady_now();
      call.rp = self->make_response_promise<chat_response>();
      call.tools = std::move(tools);
      // The parsed list (call.tools) is all the call needs from here: the
      // text (tens of KiB with every tool's schema) is not kept for the
      // life of the call.
      std::string{}.swap(req.tools_json);
      call.req = std::move(req);
      start_attempt(self, call);
      return call.rp;
    },
    [=](cancel_atom, const std::string& id) {
      auto& st = self->state;
      auto i = st.calls.find(id);
      if (i == st.calls.end())
        return;
      auto& call = i->second;
      if (call.transfer != 0) {
        st.transfers.erase(call.transfer);
        st.http->cancel(call.http_id);
      }
      MIBYAN_LOG(info, "provider", "request " << id << " cancelled");
      metrics::count_provider_call(
        endpoint_of(self, call).provider, "cancelled",
        std::chrono::duration<double>(st.cfg.clock->steady_now() - call.started)
          .count());
      call.rp.deliver(request_error(ec::interrupted,
                                    "request " + id + " was cancelled"));
      st.calls.erase(i);
    },
    [=](http_head_atom, uint64_t seq, int32_t status, std::string& ctype,
        std::string& retry_after) {
      auto call = call_of_transfer(self, seq);
      if (call == nullptr)
        return;
      call->status = status;
      call->retry_after = std::move(retry_after);
      call->last_activity = self->state.cfg.clock->steady_now();
      auto& ep = endpoint_of(self, *call);
      call->decoder = std::make_unique<response_decoder>(ep.format, status,
                                                         ctype);
      // The decoder lives in the call, the call in the state: `self` and
      // the id outlive every callback invocation (they run inside feed).
      auto id = call->req.request_id;
      call->decoder->on_text([self, id](std::string_view s) {
        auto i = self->state.calls.find(id);
        if (i != self->state.calls.end())
          send_delta(i->second, "text", s);
      });
      call->decoder->on_reasoning([self, id](std::string_view s) {
        auto i = self->state.calls.find(id);
        if (i != self->state.calls.end())
          send_delta(i->second, "reasoning", s);
      });
    },
    [=](http_data_atom, uint64_t seq, const std::string& bytes) {
      auto call = call_of_transfer(self, seq);
      if (call == nullptr || call->stale)
        return;
      call->last_activity = self->state.cfg.clock->steady_now();
      if (call->decoder)
        call->decoder->feed(bytes);
    },
    [=](http_done_atom, uint64_t seq, const std::string& error,
        bool timed_out, int32_t status, bool capped) {
      auto& st = self->state;
      auto call = call_of_transfer(self, seq);
      st.transfers.erase(seq);
      if (call == nullptr)
        return;
      call->transfer = 0;
      call->http_id = 0;
      attempt_done(self, *call, error, timed_out, status, capped);
    },
    [=](retry_atom, const std::string& id, uint64_t gen) {
      auto& st = self->state;
      auto i = st.calls.find(id);
      if (i == st.calls.end() || i->second.gen != gen
          || i->second.transfer != 0)
        return;
      start_attempt(self, i->second);
    },
    [=](stale_atom, const std::string& id, uint64_t gen) {
      auto& st = self->state;
      auto i = st.calls.find(id);
      if (i == st.calls.end() || i->second.gen != gen
          || i->second.transfer == 0 || i->second.stale)
        return;
      auto& call = i->second;
      auto idle = st.cfg.stream_idle_timeout;
      auto quiet = std::chrono::duration_cast<milliseconds>(
        st.cfg.clock->steady_now() - call.last_activity);
      if (quiet < idle) {
        arm_stale_timer(self, call, idle - quiet);
        return;
      }
      MIBYAN_LOG(warning, "provider", "request " << id << ": no data for "
                 << seconds_text(quiet) << ", aborting the stream");
      // The transfer's on_done reports "cancelled"; `stale` turns that
      // into a retryable timeout.
      call.stale = true;
      st.http->cancel(call.http_id);
    },
  };
}

} // namespace

provider_settings make_provider_settings(const options& opts,
                                         const std::string& api_key) {
  provider_settings s;
  s.main = resolve_main_endpoint(opts, api_key);
  if (!opts.model.fallback_provider.empty())
    s.fallbacks.push_back(resolve_fallback_endpoint(opts));
  // Within the ranges of config/option_table.def (validate_options).
  s.retry.max_attempts = static_cast<int>(opts.agent.api_max_retries);
  s.request_timeout = std::chrono::seconds{opts.provider.request_timeout};
  s.stream_idle_timeout
    = std::chrono::seconds{opts.provider.stream_idle_timeout};
  s.connect_timeout = std::chrono::seconds{opts.provider.connect_timeout};
  s.max_response_bytes
    = static_cast<uint64_t>(opts.provider.max_response_bytes);
  return s;
}

provider_actor spawn_provider(caf::actor_system& sys,
                              std::shared_ptr<http_client> http,
                              provider_settings settings) {
  auto impl = sys.spawn(provider_impl, std::move(http), std::move(settings));
  return caf::actor_cast<provider_actor>(impl);
}

} // namespace mibyan
