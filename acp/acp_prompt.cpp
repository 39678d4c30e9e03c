// The session/prompt method of the ACP agent (acp/acp_agent.hpp): the
// prompt's content blocks as the user message, the turn's deltas and tool
// events as session/update notifications, the result as a stopReason.
#include "acp/acp_agent.hpp"

#include "acp/acp_session.hpp"
#include "acp/acp_updates.hpp"
#include "base/log.hpp"
#include "mibyan/runtime.hpp"

namespace mibyan {

namespace {

// The user message of a prompt's content blocks; false with `why` for a
// block the agent does not take (docs/acp.md, "Prompts").
bool prompt_text(const json::value& blocks, std::string& out,
                 std::string& why) {
  if (!blocks.is_array() || blocks.as_array().empty()) {
    why = "prompt must be a non-empty array of content blocks";
    return false;
  }
  auto add = [&](const std::string& part) {
    if (!out.empty() && out.back() != '\n')
      out += "\n";
    out += part;
  };
  for (auto& b : blocks.as_array()) {
    if (!b.is_object()) {
      why = "a content block is no object";
      return false;
    }
    auto type = b.get_string("type");
    if (type == "text") {
      if (out.empty())
        out = b.get_string("text");
      else
        add(b.get_string("text"));
    } else if (type == "resource_link") {
      auto name = b.get_string("name");
      auto uri = b.get_string("uri");
      add("[@" + (name.empty() ? uri : name) + "](" + uri + ")");
    } else if (type == "resource") {
      auto r = b.find("resource");
      if (r == nullptr || !r->is_object()) {
        why = "a resource block without its resource";
        return false;
      }
      auto uri = r->get_string("uri");
      if (auto t = r->find("text"); t != nullptr && t->is_string())
        add("<context uri=\"" + uri + "\">\n" + t->as_string()
            + (t->as_string().empty() || t->as_string().back() == '\n'
                 ? ""
                 : "\n")
            + "</context>");
      else
        add("[binary resource " + uri + " not included]");
    } else if (type == "image" || type == "audio") {
      why = type + " content is not supported (see promptCapabilities)";
      return false;
    } else {
      why = "unknown content block type '" + type + "'";
      return false;
    }
  }
  if (out.find_first_not_of(" \t\r\n") == std::string::npos) {
    why = "the prompt is empty";
    return false;
  }
  return true;
}

} // namespace

bool acp_agent::run_command(const session_ptr& s, const json::value& id,
                            const std::string& text) {
  auto b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos || text[b] != '/')
    return false;
  auto e = text.find_first_of(" \t\r\n", b);
  auto name = text.substr(b + 1, e == std::string::npos ? std::string::npos
                                                        : e - b - 1);
  std::string answer;
  if (name == "help") {
    answer = "Commands: /help (this list), /yolo (switch between the ask and "
             "yolo modes).\nModes: ask (flagged commands ask for permission), "
             "yolo (they run without asking; hardline commands and deny rules "
             "still refuse).";
  } else if (name == "yolo") {
    std::string mode;
    std::string rsid;
    {
      std::lock_guard<std::mutex> guard{s->mtx};
      s->mode = s->mode == "yolo" ? "ask" : "yolo";
      mode = s->mode;
      rsid = s->runtime_id;
    }
    announce_mode(*s, rsid, mode);
    answer = mode == "yolo" ? "Yolo mode: flagged commands run without asking."
                            : "Ask mode: flagged commands ask for permission.";
  } else {
    return false; // not ours: the model gets the text
  }
  update(s->id, acp_text_chunk("agent_message_chunk", answer));
  json::value r;
  r["stopReason"] = "end_turn";
  conn_.reply(id, std::move(r));
  return true;
}

void acp_agent::prompt(const json::value& id, const json::value& params) {
  auto sid = params.get_string("sessionId");
  auto s = find(sid);
  if (!s) {
    conn_.reply_error(id, acp_error::resource_not_found,
                      "Resource not found: no session '" + sid + "'");
    return;
  }
  std::string text;
  std::string why;
  auto blocks = params.find("prompt");
  if (!prompt_text(blocks ? *blocks : json::value{}, text, why)) {
    conn_.reply_error(id, acp_error::invalid_params, "Invalid params: " + why);
    return;
  }
  turn_call call;
  {
    std::lock_guard<std::mutex> guard{s->mtx};
    if (s->running) {
      conn_.reply_error(id, acp_error::invalid_request,
                        "Invalid request: a prompt of this session is "
                        "still running");
      return;
    }
    s->running = true;
    s->cancelled = false;
    s->streamed.clear();
    s->calls.clear();
    s->diffs.clear();
    call.session_id = s->runtime_id;
    call.cwd = s->cwd;
  }
  if (run_command(s, id, text)) {
    std::lock_guard<std::mutex> guard{s->mtx};
    s->running = false;
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ++running_;
  }
  call.prompt = std::move(text);
  call.source = "acp";
  call.stream = true;
  std::weak_ptr<acp_session> weak = s;
  call.on_delta = [this, weak](const std::string& kind,
                               const std::string& chunk) {
    auto s = weak.lock();
    if (!s || chunk.empty())
      return;
    if (kind == "text") {
      {
        std::lock_guard<std::mutex> guard{s->mtx};
        s->streamed += chunk;
      }
      update(s->id, acp_text_chunk("agent_message_chunk", chunk));
    } else if (kind == "reasoning") {
      update(s->id, acp_text_chunk("agent_thought_chunk", chunk));
    }
    // "restart": the provider call is retried; ACP has no way to take
    // back sent chunks, so they stay.
  };
  call.on_tool = [this, weak](const tool_event& ev) {
    auto s = weak.lock();
    if (!s)
      return;
    const auto& cid = ev.call_id;
    const auto& name = ev.tool;
    if (ev.what == tool_event::phase::start) {
      // The model's arguments (JSON text, possibly invalid).
      json::value args;
      if (auto pa = json::parse(ev.args_json))
        args = std::move(*pa.v);
      {
        std::lock_guard<std::mutex> guard{s->mtx};
        s->streamed.clear();
        s->calls[cid] = {name, args};
      }
      update(s->id, acp_tool_call(cid, name, args));
    } else {
      json::value args;
      std::vector<acp_file_diff> diffs;
      {
        std::lock_guard<std::mutex> guard{s->mtx};
        s->streamed.clear();
        if (auto it = s->calls.find(cid); it != s->calls.end()) {
          args = std::move(it->second.second);
          s->calls.erase(it);
        }
        if (auto it = s->diffs.find(cid); it != s->diffs.end()) {
          diffs = std::move(it->second);
          s->diffs.erase(it);
        }
      }
      const auto& result = ev.result_json;
      update(s->id, acp_tool_call_done(cid, name, args, result, diffs));
      if (name == "todo")
        if (auto r = json::parse(result))
          if (auto plan = acp_plan_from_todo(*r.v); !plan.is_null())
            update(s->id, std::move(plan));
    }
  };
  MIBYAN_LOG(info, "acp", "session " << s->id << ": prompt of "
                                     << call.prompt.size() << " bytes");
  rt_.run_turn_async(call, [this, s, id](turn_result out) {
    std::string error;
    std::string final_text;
    std::string reason = acp_stop_reason(out, error, final_text);
    bool rebind = false;
    std::string streamed;
    {
      std::lock_guard<std::mutex> guard{s->mtx};
      if (s->cancelled)
        reason = "cancelled";
      streamed = std::move(s->streamed);
      s->streamed.clear();
      s->calls.clear();
      s->diffs.clear();
      if (!out.session_id.empty() && out.session_id != s->runtime_id) {
        s->runtime_id = out.session_id; // continued after compression
        rebind = true;
      }
    }
    if (rebind)
      bind_runtime_session(s, out.session_id);
    // The final answer when the provider did not stream it (or streamed
    // only part of it).
    if (!final_text.empty() && reason != "cancelled") {
      if (streamed.empty())
        update(s->id, acp_text_chunk("agent_message_chunk", final_text));
      else if (streamed != final_text
               && final_text.find(streamed) == std::string::npos)
        update(s->id,
               acp_text_chunk("agent_message_chunk", "\n\n" + final_text));
    }
    // The session takes the next prompt before the answer goes out: a
    // client may send it as soon as it reads the answer.
    {
      std::lock_guard<std::mutex> guard{s->mtx};
      s->running = false;
      s->cancelled = false;
    }
    if (!reason.empty()) {
      json::value r;
      r["stopReason"] = reason;
      conn_.reply(id, std::move(r));
    } else {
      MIBYAN_LOG(warning, "acp", "session " << s->id << ": " << error);
      conn_.reply_error(id, acp_error::internal_error, error);
    }
    std::lock_guard<std::mutex> guard{mtx_};
    --running_;
    idle_cv_.notify_all();
  });
}

} // namespace mibyan
