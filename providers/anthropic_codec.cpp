// File: providers/anthropic_codec.cpp
#include "providers/anthropic_codec.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "providers/codec_support.hpp"
#include "providers/provider_error.hpp"
#include "providers/tool_call_id.hpp"
#include "providers/tool_schema.hpp"
#include "base/strings.hpp"

namespace mibyan::anthropic {

namespace {

using codec::int_member;
using codec::valid_json;

json::value text_block(std::string text) {
  json::value b = json::value::make_object();
  b["type"] = "text";
  b["text"] = std::move(text);
  return b;
}

json::value cache_marker(const request_options& opts) {
  json::value c = json::value::make_object();
  c["type"] = "ephemeral";
  if (opts.cache_ttl_1h)
    c["ttl"] = "1h";
  return c;
}

int64_t legacy_budget(std::string_view effort) {
  if (effort == "low")
    return 4000;
  if (effort == "medium")
    return 8000;
  if (effort == "high")
    return 16000;
  return 32000; // xhigh, max
}

// One message under construction.
struct wire_message {
  std::string role;
  std::vector<json::value> blocks;
};

/// An empty non-stream content list is acceptable only for these.
bool empty_is_valid(std::string_view stop_reason) {
  // stop_sequence: a model can hit a stop sequence before any output
  // (recorded in the corpus, 019).
  return stop_reason == "end_turn" || stop_reason == "refusal"
         || stop_reason == "stop_sequence";
}

} // namespace

// -- request -----------------------------------------------------------------

thinking_style thinking_style_for(std::string_view model) {
  auto m = strings::lower(model);
  if (m.find("haiku") != std::string::npos)
    return thinking_style::none;
  if (m.find("claude-3") != std::string::npos)
    return thinking_style::legacy;
  for (std::string_view family : {"opus-4", "sonnet-4"}) {
    auto pos = m.find(family);
    if (pos == std::string::npos)
      continue;
    std::string_view rest = std::string_view{m}.substr(pos + family.size());
    if (rest.empty())
      return thinking_style::legacy; // claude-sonnet-4
    if (rest[0] != '-' && rest[0] != '.')
      continue;
    rest.remove_prefix(1);
    auto digits = rest.substr(0, rest.find_first_not_of("0123456789"));
    if (digits.size() >= 6 || digits == "0" || digits == "1")
      return thinking_style::legacy; // 4 + date, 4.0, 4.1
    return thinking_style::adaptive;
  }
  return thinking_style::adaptive;
}

json::value encode_messages(const std::vector<chat_message>& messages,
                            const request_options& opts,
                            std::string& system) {
  system.clear();
  std::vector<wire_message> out;
  for (const auto& msg : messages) {
    if (msg.role == "system" || msg.role == "developer") {
      if (msg.content.empty())
        continue;
      if (!system.empty())
        system += "\n\n";
      system += msg.content;
      continue;
    }
    wire_message w;
    if (msg.role == "assistant") {
      w.role = "assistant";
      if (opts.echo_reasoning && !msg.reasoning.empty()) {
        json::value b = json::value::make_object();
        b["type"] = "thinking";
        b["thinking"] = msg.reasoning;
        w.blocks.push_back(std::move(b));
      }
      if (!msg.content.empty())
        w.blocks.push_back(text_block(msg.content));
      for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
        const auto& tc = msg.tool_calls[i];
        json::value b = json::value::make_object();
        b["type"] = "tool_use";
        b["id"] = sanitize_tool_call_id(tc.id, i);
        b["name"] = tc.name;
        auto parsed = json::parse(tc.arguments);
        if (parsed && parsed.v->is_object())
          b["input"] = std::move(*parsed.v);
        else
          b["input"] = json::value::make_object();
        w.blocks.push_back(std::move(b));
      }
    } else if (msg.role == "tool") {
      w.role = "user";
      json::value b = json::value::make_object();
      b["type"] = "tool_result";
      b["tool_use_id"] = sanitize_tool_call_id(msg.tool_call_id, 0);
      b["content"] = msg.content.empty() ? std::string{"(no output)"}
                                         : msg.content;
      w.blocks.push_back(std::move(b));
    } else {
      w.role = "user";
      w.blocks.push_back(text_block(
        msg.content.empty() ? std::string{"(empty message)"} : msg.content));
    }
    out.push_back(std::move(w));
  }
  // Remove orphans: tool_use without a result and results without a use.
  std::set<std::string> uses;
  std::set<std::string> results;
  for (auto& w : out)
    for (auto& b : w.blocks) {
      auto type = b.get_string("type");
      if (type == "tool_use")
        uses.insert(b.get_string("id"));
      else if (type == "tool_result")
        results.insert(b.get_string("tool_use_id"));
    }
  for (auto& w : out) {
    auto& bs = w.blocks;
    bs.erase(std::remove_if(bs.begin(), bs.end(),
                            [&](const json::value& b) {
                              auto type = b.get_string("type");
                              if (type == "tool_use")
                                return results.count(b.get_string("id")) == 0;
                              if (type == "tool_result")
                                return uses.count(b.get_string("tool_use_id"))
                                       == 0;
                              return false;
                            }),
             bs.end());
    if (bs.empty() && w.role == "assistant")
      bs.push_back(text_block("(empty)"));
  }
  // Drop emptied user messages, then merge consecutive same-role ones.
  std::vector<wire_message> merged;
  for (auto& w : out) {
    if (w.blocks.empty())
      continue;
    if (!merged.empty() && merged.back().role == w.role) {
      auto& dst = merged.back().blocks;
      for (auto& b : w.blocks)
        dst.push_back(std::move(b));
    } else {
      merged.push_back(std::move(w));
    }
  }
  if (opts.cache_control) {
    size_t marked = 0;
    for (auto it = merged.rbegin(); it != merged.rend() && marked < 3; ++it) {
      for (auto b = it->blocks.rbegin(); b != it->blocks.rend(); ++b) {
        auto type = b->get_string("type");
        if (type == "thinking" || type == "redacted_thinking")
          continue;
        (*b)["cache_control"] = cache_marker(opts);
        ++marked;
        break;
      }
    }
  }
  json::value arr = json::value::make_array();
  for (auto& w : merged) {
    json::value m = json::value::make_object();
    m["role"] = w.role;
    json::value content = json::value::make_array();
    for (auto& b : w.blocks)
      content.push_back(std::move(b));
    m["content"] = std::move(content);
    arr.push_back(std::move(m));
  }
  return arr;
}

std::string build_request(const request_options& opts,
                          const std::vector<chat_message>& messages) {
  std::string system;
  auto msgs = encode_messages(messages, opts, system);
  auto style = opts.reasoning_effort.empty()
                 ? thinking_style::none
                 : thinking_style_for(opts.model);
  int64_t max_tokens = opts.max_tokens > 0 ? opts.max_tokens
                                           : default_max_output_tokens;
  if (opts.context_length > 1)
    max_tokens = std::min(max_tokens, opts.context_length - 1);
  int64_t budget = 0;
  if (style == thinking_style::legacy) {
    budget = legacy_budget(opts.reasoning_effort);
    max_tokens = std::max(max_tokens, budget + 4096);
  }
  json::value body = json::value::make_object();
  body["model"] = opts.model;
  body["max_tokens"] = max_tokens;
  if (!system.empty()) {
    if (opts.cache_control) {
      auto b = text_block(system);
      b["cache_control"] = cache_marker(opts);
      json::value arr = json::value::make_array();
      arr.push_back(std::move(b));
      body["system"] = std::move(arr);
    } else {
      body["system"] = system;
    }
  }
  body["messages"] = std::move(msgs);
  auto tools = normalize_tools(opts.tools);
  if (!tools.empty() && opts.tool_choice != "none") {
    json::value arr = json::value::make_array();
    for (auto& t : tools) {
      json::value x = json::value::make_object();
      x["name"] = t.name;
      if (!t.description.empty())
        x["description"] = t.description;
      x["input_schema"] = std::move(t.parameters);
      arr.push_back(std::move(x));
    }
    body["tools"] = std::move(arr);
    json::value choice = json::value::make_object();
    if (opts.tool_choice.empty() || opts.tool_choice == "auto") {
      choice["type"] = "auto";
    } else if (opts.tool_choice == "required") {
      choice["type"] = "any";
    } else {
      choice["type"] = "tool";
      choice["name"] = opts.tool_choice;
    }
    body["tool_choice"] = std::move(choice);
  }
  if (style == thinking_style::adaptive) {
    json::value th = json::value::make_object();
    th["type"] = "adaptive";
    th["display"] = "summarized";
    body["thinking"] = std::move(th);
    json::value oc = json::value::make_object();
    oc["effort"] = opts.reasoning_effort;
    body["output_config"] = std::move(oc);
  } else if (style == thinking_style::legacy) {
    json::value th = json::value::make_object();
    th["type"] = "enabled";
    th["budget_tokens"] = budget;
    body["thinking"] = std::move(th);
    body["temperature"] = 1;
  }
  if (opts.temperature && style != thinking_style::legacy)
    body["temperature"] = *opts.temperature;
  if (opts.stream)
    body["stream"] = true;
  if (opts.extra_body.is_object())
    for (const auto& [key, val] : opts.extra_body.as_object())
      body.set(key, val);
  return body.dump();
}

// -- responses ---------------------------------------------------------------

std::string map_stop_reason(std::string_view stop_reason) {
  if (stop_reason == "end_turn" || stop_reason == "stop_sequence")
    return "stop";
  if (stop_reason == "tool_use")
    return "tool_calls";
  if (stop_reason == "max_tokens"
      || stop_reason == "model_context_window_exceeded")
    return "length";
  if (stop_reason == "refusal")
    return "content_filter";
  return std::string{stop_reason};
}

token_usage read_usage(const json::value& usage) {
  token_usage u;
  if (!usage.is_object())
    return u;
  u.input_tokens = int_member(usage, "input_tokens", 0);
  u.output_tokens = int_member(usage, "output_tokens", 0);
  u.cache_read_tokens = int_member(usage, "cache_read_input_tokens", 0);
  u.cache_write_tokens = int_member(usage, "cache_creation_input_tokens", 0);
  return u;
}

chat_response parse_response(int status, std::string_view body) {
  chat_response r;
  json::value obj;
  if (!codec::parse_response_object(status, body, r, obj))
    return r;
  r.model = obj.get_string("model");
  if (auto e = find_error(obj); e || obj.get_string("type") == "error") {
    const auto& err = e != nullptr ? *e : obj;
    r.error = "provider error: " + describe_error(err);
    r.retryable = retryable_error(err);
    return r;
  }
  auto content = obj.find("content");
  if (content == nullptr || !content->is_array()) {
    r.error = "invalid response: the body has no content list; body "
              "starts: " + error_snippet(body, 200);
    r.retryable = true;
    return r;
  }
  auto stop = obj.get_string("stop_reason");
  bool first_thinking = true;
  for (const auto& b : content->as_array()) {
    if (!b.is_object())
      continue;
    auto type = b.get_string("type");
    if (type == "text") {
      r.content += b.get_string("text");
    } else if (type == "thinking") {
      if (!first_thinking)
        r.reasoning += "\n\n";
      first_thinking = false;
      r.reasoning += b.get_string("thinking");
    } else if (type == "tool_use") {
      tool_call call;
      call.id = b.get_string("id");
      call.name = b.get_string("name");
      auto input = b.find("input");
      call.arguments = input != nullptr && !input->is_null() ? input->dump()
                                                             : "{}";
      if (call.id.empty())
        call.id = make_tool_call_id(call.name, call.arguments,
                                    r.tool_calls.size());
      r.tool_calls.push_back(std::move(call));
    }
  }
  if (content->size() == 0 && !empty_is_valid(stop)) {
    r.error = "empty response: no content blocks (stop_reason "
              + (stop.empty() ? std::string{"missing"} : stop) + ")";
    r.retryable = true;
    return r;
  }
  r.finish_reason = map_stop_reason(stop);
  if (auto u = obj.find("usage"))
    r.usage = read_usage(*u);
  return r;
}

// -- streaming ---------------------------------------------------------------

stream_accumulator::stream_accumulator(size_t max_event_bytes)
  : stream_accumulator_base(max_event_bytes) {
  // nop
}

void stream_accumulator::add_data(std::string_view data,
                                  const std::string& event) {
  auto parsed = codec::parse_provider_json(data);
  if (!parsed || !parsed.v->is_object()) {
    set_fatal("malformed JSON in stream event " + std::to_string(events_ + 1)
              + " (" + (parsed ? std::string{"not an object"} : parsed.error)
              + "): " + error_snippet(data, 120));
    return;
  }
  add_event(*parsed.v, event);
}

stream_accumulator::block&
stream_accumulator::block_at(int64_t index, std::string_view type_hint) {
  for (auto& b : blocks_)
    if (b.index == index)
      return b;
  // A delta for a block that never started: keep its data anyway.
  block b;
  b.index = index;
  b.type = std::string{type_hint};
  blocks_.push_back(std::move(b));
  return blocks_.back();
}

void stream_accumulator::add_event(const json::value& ev,
                                   const std::string& sse_name) {
  ++events_;
  auto type = ev.get_string("type");
  if (type.empty())
    type = sse_name;
  if (type == "error" || find_error(ev) != nullptr) {
    auto e = find_error(ev);
    const auto& err = e != nullptr ? *e : ev;
    set_error("stream error: " + describe_error(err), retryable_error(err));
    return;
  }
  if (type == "message_start") {
    if (auto m = ev.find("message"); m && m->is_object()) {
      model_ = m->get_string("model");
      if (auto u = m->find("usage"))
        merge_usage(*u);
    }
  } else if (type == "content_block_start") {
    auto cb = ev.find("content_block");
    if (cb == nullptr || !cb->is_object())
      return;
    auto index = int_member(ev, "index", 0);
    block nb;
    nb.index = index;
    nb.type = cb->get_string("type");
    nb.id = cb->get_string("id");
    nb.name = cb->get_string("name");
    if (auto in = cb->find("input"))
      nb.input = *in;
    auto it = std::find_if(blocks_.begin(), blocks_.end(),
                           [&](auto& b) { return b.index == index; });
    if (it != blocks_.end())
      *it = std::move(nb); // a repeated start replaces the block
    else
      blocks_.push_back(std::move(nb));
    auto& b = block_at(index, "");
    if (b.type == "tool_use")
      tool_started_ = true;
    if (b.type == "thinking" && thinking_seen_ && on_reasoning_)
      on_reasoning_("\n\n");
    if (b.type == "thinking")
      thinking_seen_ = true;
    if (b.type == "text")
      append_text(b, cb->get_string("text"));
    else if (b.type == "thinking")
      append_thinking(b, cb->get_string("thinking"));
  } else if (type == "content_block_delta") {
    auto d = ev.find("delta");
    if (d == nullptr || !d->is_object())
      return;
    auto index = int_member(ev, "index", 0);
    auto dt = d->get_string("type");
    if (dt == "text_delta") {
      append_text(block_at(index, "text"), d->get_string("text"));
    } else if (dt == "thinking_delta") {
      append_thinking(block_at(index, "thinking"), d->get_string("thinking"));
    } else if (dt == "signature_delta") {
      block_at(index, "thinking").signature += d->get_string("signature");
    } else if (dt == "input_json_delta") {
      block_at(index, "tool_use").partial_json
        += d->get_string("partial_json");
    }
    // citations_delta and future delta types carry no text of ours.
  } else if (type == "message_delta") {
    if (auto d = ev.find("delta"); d && d->is_object()) {
      auto sr = d->find("stop_reason");
      if (sr != nullptr && sr->is_string())
        stop_reason_ = sr->as_string();
    }
    if (auto u = ev.find("usage"))
      merge_usage(*u);
  } else if (type == "message_stop") {
    done_ = true;
  }
  // ping, content_block_stop and unknown events need no action.
}

void stream_accumulator::merge_usage(const json::value& usage) {
  if (!usage.is_object())
    return;
  if (!usage_.is_object())
    usage_ = json::value::make_object();
  for (const auto& [key, val] : usage.as_object())
    usage_.set(key, val);
}

void stream_accumulator::append_text(block& b, std::string_view s) {
  add_text(b.text, s, !tool_started_);
}

void stream_accumulator::append_thinking(block& b, std::string_view s) {
  add_reasoning(b.thinking, s);
}

chat_response stream_accumulator::finish(int http_status) {
  end_input();
  chat_response r;
  r.http_status = http_status;
  r.model = model_;
  r.usage = read_usage(usage_);
  bool first_thinking = true;
  bool truncated = false;
  for (const auto& b : blocks_) {
    if (b.type == "text") {
      r.content += b.text;
    } else if (b.type == "thinking") {
      if (!first_thinking)
        r.reasoning += "\n\n";
      first_thinking = false;
      r.reasoning += b.thinking;
    } else if (b.type == "tool_use") {
      tool_call call;
      call.id = b.id;
      call.name = b.name;
      if (!b.partial_json.empty())
        call.arguments = b.partial_json;
      else if (b.input.is_object())
        call.arguments = b.input.dump();
      else
        call.arguments = "{}";
      if (!valid_json(call.arguments))
        truncated = true;
      if (call.id.empty())
        call.id = make_tool_call_id(call.name, call.arguments,
                                    r.tool_calls.size());
      r.tool_calls.push_back(std::move(call));
    }
  }
  r.finish_reason = map_stop_reason(stop_reason_);
  if (take_error(r, http_status))
    return r;
  if (events_ == 0) {
    r.error = "empty stream: the provider sent no events";
    r.retryable = true;
    return r;
  }
  if (stop_reason_.empty()) {
    if (truncated) {
      // Dropped inside a tool call: no calls, `length` (docs/providers.md, "Streaming").
      r.tool_calls.clear();
      r.finish_reason = "length";
      return r;
    }
    r.error = "stream ended without a stop_reason after "
              + std::to_string(events_) + " events (connection dropped?)";
    r.retryable = true;
    return r;
  }
  if (blocks_.empty() && !empty_is_valid(stop_reason_)) {
    r.error = "empty response: no content blocks (stop_reason "
              + stop_reason_ + ")";
    r.retryable = true;
    return r;
  }
  // Unparseable input under a real stop reason stays as sent; the agent
  // loop answers it with the parser's error (docs/agent_loop.md).
  return r;
}

} // namespace mibyan::anthropic
