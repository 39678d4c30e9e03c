// The MCP server core (mcp_server/server_core.hpp), part: what it sends to
// a client. Responses, errors, notifications and log messages go out
// through the session's outbound hook; a server-to-client request
// (ask_client) waits for the client's reply, which dispatch hands to
// on_reply; the approval and clarify channels of a session ask the client
// through elicitation when it supports forms.
#include "mcp_server/server_core.hpp"

#include <algorithm>

#include "base/log.hpp"
#include "mcp_server/core_impl.hpp"
#include "mcp_server/elicitation.hpp"

namespace mibyan {

using steady = std::chrono::steady_clock;

// -- sending --------------------------------------------------------------------

void mcp_server_core::impl::send(const std::shared_ptr<session>& s,
                                 const json::value& msg,
                                 const json::value& related, bool final) {
  mcp_outbound out;
  {
    std::lock_guard<std::mutex> g{s->mtx};
    out = s->out;
  }
  if (out)
    out(msg.dump(), related, final);
}

void mcp_server_core::impl::respond(const std::shared_ptr<session>& s,
                                    const json::value& id,
                                    json::value result) {
  json::value m;
  m["jsonrpc"] = "2.0";
  m["id"] = id;
  m["result"] = std::move(result);
  send(s, m, id, true);
}

void mcp_server_core::impl::fail(const std::shared_ptr<session>& s,
                                 const json::value& id, int code,
                                 const std::string& message) {
  mcp_outbound out;
  {
    std::lock_guard<std::mutex> g{s->mtx};
    out = s->out;
  }
  if (out)
    out(mcp_error_response(id, code, message), id, true);
}

void mcp_server_core::impl::notify(const std::shared_ptr<session>& s,
                                   const char* method, json::value params,
                                   const json::value& related) {
  json::value m;
  m["jsonrpc"] = "2.0";
  m["method"] = method;
  m["params"] = std::move(params);
  send(s, m, related, false);
}

void mcp_server_core::impl::log_to_client(const std::shared_ptr<session>& s,
                                          int level, const std::string& text,
                                          const json::value& related) {
  {
    std::lock_guard<std::mutex> g{s->mtx};
    if (!s->initialized || level < s->log_level)
      return;
  }
  json::value params;
  params["level"] = mcp_log_levels[std::clamp(level, 0, 7)];
  params["logger"] = "mibyan";
  params["data"] = text;
  notify(s, "notifications/message", std::move(params), related);
}

// -- server-to-client requests --------------------------------------------------

result<json::value> mcp_server_core::impl::ask_client(
  const std::shared_ptr<session>& s, const char* method, json::value params,
  std::chrono::seconds timeout, const std::atomic<bool>* cancelled) {
  auto o = std::make_shared<outgoing>();
  int64_t id = 0;
  json::value related;
  {
    std::lock_guard<std::mutex> g{s->mtx};
    if (s->closed)
      return result<json::value>::failure(status_code::unavailable,
                                          "the MCP session ended");
    id = s->next_out_id++;
    s->outgoing[id] = o;
    // The request belongs to the tool call that asks; over HTTP it then
    // travels on that call's response stream. With several calls running
    // nobody knows which one asks: the transport picks a stream.
    if (s->calls.size() == 1)
      related = s->calls.begin()->second->id;
  }
  json::value m;
  m["jsonrpc"] = "2.0";
  m["id"] = id;
  m["method"] = method;
  m["params"] = std::move(params);
  send(s, m, related, false);
  auto deadline = steady::now() + timeout;
  std::unique_lock<std::mutex> lk{o->m};
  status_code why = status_code::ok;
  while (!o->done) {
    if (cancelled != nullptr && cancelled->load()) {
      why = status_code::cancelled;
      break;
    }
    if (steady::now() >= deadline) {
      why = status_code::timeout;
      break;
    }
    o->cv.wait_for(lk, std::chrono::milliseconds(100));
  }
  if (o->done) {
    if (!o->error.empty())
      return result<json::value>::failure(status_code::unavailable, o->error);
    return result<json::value>{o->result};
  }
  lk.unlock();
  {
    std::lock_guard<std::mutex> g{s->mtx};
    s->outgoing.erase(id);
  }
  json::value cp;
  cp["requestId"] = id;
  cp["reason"] = why == status_code::timeout ? "timed out"
                                             : "the tool call was cancelled";
  notify(s, "notifications/cancelled", std::move(cp), related);
  return result<json::value>::failure(
    why, why == status_code::timeout ? "no answer in time" : "cancelled");
}

void mcp_server_core::impl::on_reply(const std::shared_ptr<session>& s,
                                     const json::value& msg) {
  const auto* id = msg.find("id");
  std::shared_ptr<outgoing> o;
  if (id != nullptr && id->is_int()) {
    std::lock_guard<std::mutex> g{s->mtx};
    auto i = s->outgoing.find(id->as_int());
    if (i != s->outgoing.end()) {
      o = i->second;
      s->outgoing.erase(i);
    }
  }
  if (!o) {
    MIBYAN_LOG(warning, "mcp-serve",
               "session " << s->id << ": a response to no request of ours (id "
                          << (id ? id->dump() : "none") << ") ignored");
    return;
  }
  std::lock_guard<std::mutex> g{o->m};
  o->done = true;
  if (const auto* r = msg.find("result"); r != nullptr && r->is_object()) {
    o->result = *r;
  } else {
    const auto* e = msg.find("error");
    o->error = "the client answered with an error";
    if (e != nullptr && e->is_object())
      o->error += ": " + e->get_string("message");
  }
  o->cv.notify_all();
}

// -- channels --------------------------------------------------------------------

void mcp_server_core::impl::install_channels(
  const std::shared_ptr<session>& s, bool elicit) {
  if (!backend.set_channels)
    return;
  if (!elicit) {
    // Nobody can answer: flagged commands follow the unattended default
    // (deny unless configured otherwise) with its reason in the result;
    // clarify is unavailable.
    backend.set_channels(s->mibyan_id, nullptr, nullptr);
    return;
  }
  std::weak_ptr<session> ws = s;
  std::weak_ptr<mcp_server_core> wc = self;
  approval_callback approve = [ws, wc](const approval_prompt& pr) {
    auto sess = ws.lock();
    auto core = wc.lock();
    if (!sess || !core)
      return approval_choice::deny;
    auto& p = *core->p_;
    auto version = protocol_version_of(*sess);
    p.log_to_client(sess, 2, "approval asked for: " + pr.command, {});
    auto r = p.ask_client(sess, "elicitation/create",
                          approval_elicitation(pr, version), pr.timeout,
                          pr.cancelled);
    if (!r) {
      MIBYAN_LOG(info, "mcp-serve", "session " << sess->id
                                               << ": approval not answered: "
                                               << r.error);
      return r.code == status_code::timeout ? approval_choice::timeout
                                            : approval_choice::deny;
    }
    auto choice = approval_choice_of(*r, pr);
    MIBYAN_LOG(info, "mcp-serve",
               "session " << sess->id << ": approval answered "
                          << r->get_string("action") << " -> "
                          << (choice == approval_choice::deny ? "deny"
                                                              : "allow"));
    return choice;
  };
  clarify_callback clarify = [ws, wc](const clarify_prompt& pr) {
    auto sess = ws.lock();
    auto core = wc.lock();
    if (!sess || !core)
      return std::string{};
    auto& p = *core->p_;
    auto r = p.ask_client(sess, "elicitation/create",
                          clarify_elicitation(pr, protocol_version_of(*sess)),
                          pr.timeout, pr.cancelled);
    return r ? clarify_answer_of(*r) : std::string{};
  };
  backend.set_channels(s->mibyan_id, std::move(approve), std::move(clarify));
}

} // namespace mibyan
