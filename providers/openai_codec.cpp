// File: providers/openai_codec.cpp
#include "providers/openai_codec.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "providers/codec_support.hpp"
#include "providers/provider_error.hpp"
#include "providers/tool_call_id.hpp"
#include "providers/tool_schema.hpp"
#include "base/strings.hpp"

namespace mibyan::openai {

namespace {

// -- small helpers -----------------------------------------------------------

using codec::int_member;
using codec::valid_json;

bool contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

/// Returns a string or integer as text, "" for anything else.
std::string id_text(const json::value* x) {
  if (x == nullptr)
    return {};
  if (x->is_string())
    return x->as_string();
  if (x->is_int())
    return std::to_string(x->as_int());
  return {};
}

/// Returns a finish_reason as text: strings as is, integers stringified,
/// "" for null or anything else.
std::string finish_text(const json::value* x) {
  return id_text(x);
}

/// Calls `sink(is_reasoning, fragment)` for every text fragment of a message
/// `content`: a string, an array of parts (strings, {type: text}, Mistral
/// {type: thinking, thinking: str | [{type: text}]}), or a single part.
template <class Sink>
void flatten_content(const json::value& content, Sink&& sink) {
  auto part = [&](const json::value& p) {
    if (p.is_string()) {
      sink(false, p.as_string());
      return;
    }
    if (!p.is_object())
      return;
    auto type = p.get_string("type");
    if (type == "thinking") {
      auto th = p.find("thinking");
      if (th != nullptr && th->is_string()) {
        sink(true, th->as_string());
      } else if (th != nullptr && th->is_array()) {
        for (auto& q : th->as_array())
          if (q.is_object() && q.get_string("type") == "text")
            sink(true, q.get_string("text"));
      }
      return;
    }
    if (type == "text" || type == "output_text" || type.empty()) {
      auto t = p.find("text");
      if (t != nullptr && t->is_string())
        sink(false, t->as_string());
    }
  };
  if (content.is_string())
    sink(false, content.as_string());
  else if (content.is_array())
    for (auto& p : content.as_array())
      part(p);
  else if (content.is_object())
    part(content);
}

/// Appends the text of OpenRouter `reasoning_details` entries.
void details_text(const json::value& details, std::string& out) {
  if (!details.is_array())
    return;
  for (auto& d : details.as_array()) {
    if (!d.is_object())
      continue;
    auto type = d.get_string("type");
    if (type == "reasoning.text")
      out += d.get_string("text");
    else if (type == "reasoning.summary")
      out += d.get_string("summary");
  }
}

/// Returns the reasoning text of a message or delta: `reasoning_content`,
/// else `reasoning` (docs/providers.md, "Streaming").
std::string plain_reasoning(const json::value& msg) {
  auto rc = msg.find("reasoning_content");
  if (rc != nullptr && rc->is_string() && !rc->as_string().empty())
    return rc->as_string();
  auto r = msg.find("reasoning");
  if (r != nullptr && r->is_string())
    return r->as_string();
  return {};
}


} // namespace

// -- request -----------------------------------------------------------------

bool wants_max_completion_tokens(std::string_view base_url,
                                 std::string_view model) {
  auto url = strings::lower(base_url);
  std::string_view host = url;
  if (auto p = host.find("://"); p != std::string_view::npos)
    host.remove_prefix(p + 3);
  host = host.substr(0, host.find_first_of("/:?#"));
  if (host == "api.openai.com" || strings::ends_with(host, ".azure.com")
      || host == "api.githubcopilot.com"
      || strings::ends_with(host, ".githubcopilot.com"))
    return true;
  auto m = strings::lower(model);
  std::string_view name = m;
  if (auto slash = name.rfind('/'); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  if (contains(name, "gpt-4o") || contains(name, "gpt-4.1")
      || contains(name, "gpt-5"))
    return true;
  return name.size() >= 2 && name[0] == 'o'
         && std::isdigit(static_cast<unsigned char>(name[1]));
}

json::value encode_message(const chat_message& msg,
                           const request_options& opts) {
  json::value m = json::value::make_object();
  auto role = msg.role;
  if (role == "system") {
    auto model = strings::lower(opts.model);
    if (contains(model, "gpt-5") || contains(model, "codex"))
      role = "developer";
  }
  m["role"] = role;
  if (role == "assistant") {
    if (msg.tool_calls.empty() || !msg.content.empty())
      m["content"] = msg.content;
    else
      m["content"] = nullptr;
    if (opts.echo_reasoning_content && !msg.reasoning.empty())
      m["reasoning_content"] = msg.reasoning;
    if (!msg.tool_calls.empty()) {
      json::value calls = json::value::make_array();
      for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
        const auto& tc = msg.tool_calls[i];
        auto args = tc.arguments.empty() ? std::string{"{}"} : tc.arguments;
        json::value call = json::value::make_object();
        call["id"] = tc.id.empty() ? make_tool_call_id(tc.name, args, i)
                                   : tc.id;
        call["type"] = "function";
        json::value fn = json::value::make_object();
        fn["name"] = tc.name;
        fn["arguments"] = args;
        call["function"] = std::move(fn);
        calls.push_back(std::move(call));
      }
      m["tool_calls"] = std::move(calls);
    }
  } else if (role == "tool") {
    m["tool_call_id"] = msg.tool_call_id;
    if (!msg.tool_name.empty())
      m["name"] = msg.tool_name;
    m["content"] = msg.content;
  } else {
    m["content"] = msg.content;
  }
  return m;
}

namespace {

// The "tools" array of the body, or null when there are none.
json::value tools_array(const json::value& tools_in) {
  auto tools = normalize_tools(tools_in);
  if (tools.empty())
    return json::value{};
  json::value arr = json::value::make_array();
  for (auto& t : tools) {
    json::value fn = json::value::make_object();
    fn["name"] = t.name;
    if (!t.description.empty())
      fn["description"] = t.description;
    fn["parameters"] = std::move(t.parameters);
    json::value wrapped = json::value::make_object();
    wrapped["type"] = "function";
    wrapped["function"] = std::move(fn);
    arr.push_back(std::move(wrapped));
  }
  return arr;
}

} // namespace

std::string render_tools(const json::value& tools) {
  auto arr = tools_array(tools);
  return arr.is_null() ? std::string{} : arr.dump();
}

std::string build_request(const request_options& opts,
                          const std::vector<chat_message>& messages) {
  json::value body = json::value::make_object();
  body["model"] = opts.model;
  json::value msgs = json::value::make_array();
  for (const auto& msg : messages)
    msgs.push_back(encode_message(msg, opts));
  body["messages"] = std::move(msgs);
  // Pre-rendered tools are spliced into the text after "messages" (the
  // place they take in the object), unless extra_body may replace keys.
  bool extra = opts.extra_body.is_object() && opts.extra_body.size() > 0;
  bool splice = !opts.tools_json.empty() && !extra;
  if (!opts.tools_json.empty() && extra) {
    auto parsed = json::parse(opts.tools_json);
    if (parsed)
      body["tools"] = std::move(*parsed.v);
  } else if (opts.tools_json.empty()) {
    auto arr = tools_array(opts.tools);
    if (!arr.is_null())
      body["tools"] = std::move(arr);
  }
  // The members after "tools", in order.
  json::value rest = json::value::make_object();
  if (opts.max_tokens)
    rest[opts.max_completion_tokens ? "max_completion_tokens"
                                    : "max_tokens"] = *opts.max_tokens;
  if (opts.temperature)
    rest["temperature"] = *opts.temperature;
  if (!opts.reasoning_effort.empty()) {
    json::value r = json::value::make_object();
    r["enabled"] = true;
    r["effort"] = opts.reasoning_effort;
    rest["reasoning"] = std::move(r);
  }
  rest["stream"] = opts.stream;
  if (opts.stream && opts.include_usage) {
    json::value so = json::value::make_object();
    so["include_usage"] = true;
    rest["stream_options"] = std::move(so);
  }
  if (splice) {
    auto out = body.dump();
    auto tail = rest.dump();
    // One allocation of the exact size: the body lives as long as its
    // transfer, and growth by doubling would leave up to half of it unused.
    out.reserve(out.size() + 9 + opts.tools_json.size() + tail.size());
    out.pop_back(); // '}'
    out += ",\"tools\":";
    out += opts.tools_json;
    out += ',';
    out.append(tail, 1, std::string::npos); // without its '{'
    return out;
  }
  for (auto& [key, val] : rest.as_object())
    body.set(key, std::move(val));
  if (opts.extra_body.is_object())
    for (const auto& [key, val] : opts.extra_body.as_object())
      body.set(key, val);
  return body.dump();
}

// -- usage -------------------------------------------------------------------

token_usage read_usage(const json::value& usage) {
  token_usage u;
  if (!usage.is_object())
    return u;
  u.input_tokens = int_member(usage, "prompt_tokens", 0);
  u.output_tokens = int_member(usage, "completion_tokens", 0);
  if (auto d = usage.find("prompt_tokens_details"); d && d->is_object()) {
    u.cache_read_tokens = int_member(*d, "cached_tokens", 0);
    u.cache_write_tokens = int_member(*d, "cache_write_tokens", 0);
  }
  if (u.cache_read_tokens == 0)
    u.cache_read_tokens = int_member(usage, "prompt_cache_hit_tokens", 0);
  if (auto d = usage.find("completion_tokens_details"); d && d->is_object())
    u.reasoning_tokens = int_member(*d, "reasoning_tokens", 0);
  // OpenRouter and compatible gateways report the charge of the call.
  if (auto c = usage.find("cost"); c && c->is_number()) {
    double v = c->as_double();
    if (v >= 0 && v < 1e9) {
      u.cost_usd = v;
      u.has_cost = true;
    }
  }
  return u;
}

// -- non-streaming response --------------------------------------------------

chat_response parse_response(int status, std::string_view body) {
  chat_response r;
  json::value obj;
  if (!codec::parse_response_object(status, body, r, obj))
    return r;
  r.model = obj.get_string("model");
  if (auto e = find_error(obj)) {
    r.error = "provider error: " + describe_error(*e);
    r.retryable = retryable_error(*e);
    return r;
  }
  auto choices = obj.find("choices");
  const json::value* choice = nullptr;
  if (choices != nullptr && choices->is_array())
    for (const auto& ch : choices->as_array())
      if (ch.is_object() && int_member(ch, "index", 0) == 0) {
        choice = &ch;
        break;
      }
  if (choice == nullptr) {
    r.error = "invalid response: the body has no choices; body starts: "
              + error_snippet(body, 200);
    r.retryable = true;
    return r;
  }
  const json::value* msg = choice->find("message");
  if (msg == nullptr || !msg->is_object())
    msg = choice->find("delta");
  json::value none = json::value::make_object();
  if (msg == nullptr || !msg->is_object())
    msg = &none;
  if (auto c = msg->find("content"))
    flatten_content(*c, [&](bool reasoning, const std::string& s) {
      (reasoning ? r.reasoning : r.content) += s;
    });
  r.reasoning += plain_reasoning(*msg);
  if (r.reasoning.empty())
    if (auto d = msg->find("reasoning_details"))
      details_text(*d, r.reasoning);
  if (auto calls = msg->find("tool_calls"); calls && calls->is_array()) {
    size_t i = 0;
    for (const auto& tc : calls->as_array()) {
      if (!tc.is_object())
        continue;
      tool_call call;
      call.id = id_text(tc.find("id"));
      const json::value* fn = tc.find("function");
      if (fn == nullptr || !fn->is_object())
        fn = &tc;
      call.name = fn->get_string("name");
      if (auto a = fn->find("arguments"); a && a->is_string())
        call.arguments = a->as_string();
      else if (a != nullptr && !a->is_null())
        call.arguments = a->dump();
      if (call.arguments.empty())
        call.arguments = "{}";
      if (call.id.empty())
        call.id = make_tool_call_id(call.name, call.arguments, i);
      r.tool_calls.push_back(std::move(call));
      ++i;
    }
  }
  r.finish_reason = finish_text(choice->find("finish_reason"));
  if (r.finish_reason.empty())
    r.finish_reason = "stop";
  auto refusal = msg->get_string("refusal");
  if (!refusal.empty() && r.content.empty() && r.tool_calls.empty()) {
    r.content = refusal;
    r.finish_reason = "content_filter";
  }
  if (auto u = obj.find("usage"); u && u->is_object()) {
    r.usage = read_usage(*u);
  } else if (auto xg = obj.find("x_groq"); xg && xg->is_object()) {
    if (auto xu = xg->find("usage"); xu && xu->is_object())
      r.usage = read_usage(*xu);
  }
  return r;
}

// -- streaming ---------------------------------------------------------------

stream_accumulator::stream_accumulator(size_t max_event_bytes)
  : stream_accumulator_base(max_event_bytes) {
  // nop
}

void stream_accumulator::add_data(std::string_view data,
                                  const std::string& event) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  auto parsed = codec::parse_provider_json(data);
  if (!parsed) {
    set_fatal("malformed JSON in stream chunk " + std::to_string(chunks_ + 1)
              + " (" + parsed.error + "): " + error_snippet(data, 120));
    return;
  }
  if (!parsed.v->is_object()) {
    set_fatal("stream chunk " + std::to_string(chunks_ + 1)
              + " is not a JSON object: " + error_snippet(data, 120));
    return;
  }
  add_chunk(*parsed.v, event);
}

void stream_accumulator::add_chunk(const json::value& chunk,
                                   const std::string& event) {
  ++chunks_;
  auto err = find_error(chunk);
  if (err != nullptr || event == "error") {
    const auto& e = err != nullptr ? *err : chunk;
    set_error("stream error: " + describe_error(e), retryable_error(e));
  }
  if (auto m = chunk.find("model"); m && m->is_string()
                                    && !m->as_string().empty())
    model_ = m->as_string();
  if (auto u = chunk.find("usage"); u && u->is_object()) {
    usage_ = read_usage(*u);
    have_usage_ = true;
  } else if (auto xg = chunk.find("x_groq"); xg && xg->is_object()) {
    if (auto xu = xg->find("usage"); xu && xu->is_object()) {
      usage_ = read_usage(*xu);
      have_usage_ = true;
    }
  }
  auto choices = chunk.find("choices");
  if (choices == nullptr || !choices->is_array())
    return;
  for (const auto& ch : choices->as_array()) {
    if (!ch.is_object() || int_member(ch, "index", 0) != 0)
      continue;
    const json::value* delta = ch.find("delta");
    if (delta == nullptr || delta->is_null())
      delta = ch.find("message"); // servers that send whole messages
    if (delta != nullptr && delta->is_object())
      add_delta(*delta);
    auto fr = finish_text(ch.find("finish_reason"));
    if (!fr.empty())
      finish_reason_ = std::move(fr);
  }
}

void stream_accumulator::add_delta(const json::value& delta) {
  if (auto c = delta.find("content"))
    flatten_content(*c, [&](bool reasoning, const std::string& s) {
      if (reasoning)
        add_reasoning(reasoning_, s);
      else
        add_text(content_, s, slots_.empty());
    });
  auto plain = plain_reasoning(delta);
  if (!plain.empty())
    add_reasoning(reasoning_, plain);
  if (auto d = delta.find("reasoning_details")) {
    std::string text;
    details_text(*d, text);
    if (!text.empty()) {
      details_reasoning_ += text;
      // Fallback only: reasoning_details duplicates `reasoning` when both
      // are sent, so the callback sees it only while no plain field has.
      if (reasoning_.empty() && on_reasoning_)
        on_reasoning_(text);
    }
  }
  if (auto calls = delta.find("tool_calls"); calls && calls->is_array())
    for (const auto& tc : calls->as_array())
      add_tool_call(tc);
  // Legacy single function_call deltas.
  if (auto fc = delta.find("function_call"); fc && fc->is_object()) {
    json::value tc = json::value::make_object();
    tc["index"] = 0;
    tc["function"] = *fc;
    add_tool_call(tc);
  }
}

void stream_accumulator::add_tool_call(const json::value& tc) {
  if (!tc.is_object())
    return;
  auto index = int_member(tc, "index", 0);
  auto id = id_text(tc.find("id"));
  size_t pos = slots_.size();
  for (auto& [idx, p] : open_slot_)
    if (idx == index) {
      pos = p;
      break;
    }
  bool fresh = pos == slots_.size();
  if (!fresh && !id.empty() && !slots_[pos].id.empty()
      && slots_[pos].id != id) {
    fresh = true; // a server that reuses one index for every call
    pos = slots_.size();
  }
  if (fresh) {
    slot s;
    s.index = index;
    slots_.push_back(std::move(s));
    auto it = std::find_if(open_slot_.begin(), open_slot_.end(),
                           [&](auto& x) { return x.first == index; });
    if (it != open_slot_.end())
      it->second = pos;
    else
      open_slot_.emplace_back(index, pos);
  }
  auto& s = slots_[pos];
  if (!id.empty())
    s.id = std::move(id);
  const json::value* fn = tc.find("function");
  if (fn == nullptr || !fn->is_object())
    return;
  auto name = fn->get_string("name");
  if (!name.empty())
    s.name = std::move(name);
  if (auto a = fn->find("arguments"); a && a->is_string())
    s.arguments += a->as_string();
  else if (a != nullptr && !a->is_null())
    s.arguments += a->dump();
}

chat_response stream_accumulator::finish(int http_status) {
  end_input();
  chat_response r;
  r.http_status = http_status;
  r.model = model_;
  r.usage = usage_;
  // finish() is called once: the accumulated text moves into the answer.
  r.content = std::move(content_);
  r.reasoning = std::move(reasoning_.empty() ? details_reasoning_
                                             : reasoning_);
  // Tool calls in index order (stable: calls sharing an index keep their
  // arrival order).
  std::vector<const slot*> order;
  for (const auto& s : slots_)
    order.push_back(&s);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* x, auto* y) { return x->index < y->index; });
  // True when a call's arguments do not parse: with no finish reason the
  // stream was cut inside the call.
  bool truncated = false;
  for (size_t i = 0; i < order.size(); ++i) {
    tool_call call;
    call.name = order[i]->name;
    call.arguments = order[i]->arguments.empty() ? std::string{"{}"}
                                                 : order[i]->arguments;
    if (!valid_json(call.arguments))
      truncated = true;
    call.id = order[i]->id.empty()
                ? make_tool_call_id(call.name, call.arguments, i)
                : order[i]->id;
    r.tool_calls.push_back(std::move(call));
  }
  r.finish_reason = finish_reason_;
  if (take_error(r, http_status))
    return r;
  if (finish_reason_.empty() && r.content.empty() && r.reasoning.empty()
      && r.tool_calls.empty()) {
    r.error = chunks_ == 0
                ? "empty stream: the provider sent no chunks"
                : "empty stream: the provider sent no content, tool calls "
                  "or finish reason";
    r.retryable = true;
    return r;
  }
  if (truncated && finish_reason_.empty()) {
    // The connection dropped inside a tool call: answer without the calls
    // and with `length`, so the loop asks for smaller calls.
    r.tool_calls.clear();
    r.finish_reason = "length";
    return r;
  }
  if (finish_reason_.empty() && !done_) {
    r.error = "stream ended without a finish reason or [DONE] after "
              + std::to_string(chunks_)
              + " chunks (connection dropped?)";
    r.retryable = true;
    return r;
  }
  // Unparseable arguments under a real finish reason are the model's
  // mistake, not a truncation: the calls stay as sent and the agent loop
  // answers each bad one with the parser's error (docs/agent_loop.md,
  // "Tool-call arguments").
  return r;
}

} // namespace mibyan::openai
