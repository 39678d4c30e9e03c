#include "runtime/turn_events.hpp"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "agent/turn_result.hpp"
#include "base/json.hpp"

namespace mibyan {

namespace {

void frame(turn_event& ev) {
  ev.sse.reserve(ev.name.size() + ev.data.size() + 16);
  ev.sse = "event: ";
  ev.sse += ev.name;
  ev.sse += "\ndata: ";
  ev.sse += ev.data;
  ev.sse += "\n\n";
}

// {"session_id":`sid`,"<name>":"<value>",...}: an event of string fields.
std::string session_event(
  const std::string& sid,
  std::initializer_list<std::pair<const char*, std::string_view>> fields) {
  std::string d = "{\"session_id\":";
  json::append_quoted(d, sid);
  for (auto& [name, value] : fields) {
    d += ",\"";
    d += name;
    d += "\":";
    json::append_quoted(d, value);
  }
  d += "}";
  return d;
}

} // namespace

// -- turn_subscriber ----------------------------------------------------------

bool turn_subscriber::offer(const turn_event_ptr& ev) {
  std::lock_guard<std::mutex> g{mtx_};
  if (queue_.size() >= capacity_) {
    ++lost_;
    ++lost_total_;
    return false;
  }
  queue_.push_back(ev);
  if (!armed_)
    return false;
  armed_ = false;
  return true;
}

std::vector<turn_event_ptr> turn_subscriber::take() {
  std::vector<turn_event_ptr> out;
  std::lock_guard<std::mutex> g{mtx_};
  out.reserve(queue_.size() + 1);
  for (auto& e : queue_)
    out.push_back(std::move(e));
  queue_.clear();
  if (lost_ > 0) {
    auto lag = std::make_shared<turn_event>();
    lag->name = "lagged";
    lag->data = "{\"lost\":" + std::to_string(lost_) + "}";
    frame(*lag);
    out.push_back(std::move(lag));
    lost_ = 0;
  }
  armed_ = true;
  return out;
}

uint64_t turn_subscriber::lost_total() const {
  std::lock_guard<std::mutex> g{mtx_};
  return lost_total_;
}

// -- turn_event_hub -----------------------------------------------------------

std::shared_ptr<turn_subscriber>
turn_event_hub::subscribe(size_t capacity, std::function<void()> wake) {
  auto s = std::make_shared<turn_subscriber>(capacity, std::move(wake));
  std::lock_guard<std::mutex> g{mtx_};
  auto next = std::make_shared<std::vector<std::shared_ptr<turn_subscriber>>>(
    *subs_);
  next->push_back(s);
  subs_ = std::move(next);
  count_.store(subs_->size(), std::memory_order_relaxed);
  return s;
}

void turn_event_hub::unsubscribe(const std::shared_ptr<turn_subscriber>& s) {
  if (!s)
    return;
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto next
      = std::make_shared<std::vector<std::shared_ptr<turn_subscriber>>>();
    for (auto& x : *subs_)
      if (x != s)
        next->push_back(x);
    subs_ = std::move(next);
    count_.store(subs_->size(), std::memory_order_relaxed);
  }
  // A publisher that copied the list before may still offer: it finds the
  // wake gone (taken under the subscriber's lock).
  std::lock_guard<std::mutex> g{s->mtx_};
  s->wake_ = nullptr;
  s->queue_.clear();
}

size_t turn_event_hub::subscribers() const {
  return count_.load(std::memory_order_relaxed);
}

std::string turn_event_hub::truncate(const std::string& s, size_t max) {
  if (s.size() <= max)
    return s;
  size_t cut = max;
  // Back off continuation bytes (10xxxxxx) so the cut is on a boundary.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut) + "\xE2\x80\xA6[truncated]";
}

std::string turn_event_hub::turn_json(const running_turn& t) {
  std::string out = "{\"session_id\":";
  json::append_quoted(out, t.session_id);
  out += ",\"started_at_ms\":" + std::to_string(t.started_at_ms);
  out += ",\"prompt\":";
  json::append_quoted(out, t.prompt);
  out += ",\"model\":";
  json::append_quoted(out, t.model);
  out += ",\"source\":";
  json::append_quoted(out, t.source);
  out += "}";
  return out;
}

std::vector<running_turn> turn_event_hub::running() const {
  std::lock_guard<std::mutex> g{mtx_};
  std::vector<running_turn> out;
  out.reserve(turns_.size());
  for (auto& [token, t] : turns_)
    out.push_back(t);
  return out;
}

turn_event turn_event_hub::snapshot() const {
  turn_event ev;
  ev.name = "snapshot";
  ev.data = "{\"turns\":[";
  bool first = true;
  for (auto& t : running()) {
    if (!first)
      ev.data += ",";
    first = false;
    ev.data += turn_json(t);
  }
  ev.data += "]}";
  frame(ev);
  return ev;
}

void turn_event_hub::other(const std::string& name, std::string data) {
  if (!active())
    return;
  turn_event ev;
  ev.name = name;
  ev.data = std::move(data);
  publish(std::move(ev));
}

void turn_event_hub::publish(turn_event ev) {
  std::shared_ptr<const std::vector<std::shared_ptr<turn_subscriber>>> subs;
  {
    std::lock_guard<std::mutex> g{mtx_};
    subs = subs_;
  }
  frame(ev);
  auto shared = std::make_shared<const turn_event>(std::move(ev));
  for (auto& s : *subs) {
    if (!s->offer(shared))
      continue;
    // The wake runs under the subscriber's lock so that none follows
    // unsubscribe; it only posts (see the header).
    std::lock_guard<std::mutex> g{s->mtx_};
    if (s->wake_)
      s->wake_();
  }
}

uint64_t turn_event_hub::turn_started(running_turn t) {
  t.prompt = truncate(t.prompt, max_prompt_bytes);
  if (t.started_at_ms == 0)
    t.started_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  uint64_t token = 0;
  {
    std::lock_guard<std::mutex> g{mtx_};
    token = ++next_;
    turns_.emplace(token, t);
  }
  if (active())
    publish(turn_event{"turn_start", turn_json(t), {}});
  return token;
}

void turn_event_hub::delta(const std::string& session_id,
                           const std::string& kind, const std::string& text) {
  if (!active())
    return;
  publish(turn_event{
    "delta", session_event(session_id,
                           {{"kind", kind},
                            {"text", truncate(text, max_field_bytes)}}),
    {}});
}

void turn_event_hub::tool(const std::string& session_id,
                          const tool_event& ev) {
  if (!active())
    return;
  auto v = tool_event_json(ev);
  for (auto* key : {"arguments", "result"})
    if (auto f = v.find(key); f && f->is_string()
                              && f->as_string().size() > max_field_bytes)
      *f = truncate(f->as_string(), max_field_bytes);
  v["session_id"] = session_id;
  publish(turn_event{tool_event_kind(ev), v.dump(), {}});
}

void turn_event_hub::turn_ended(uint64_t token, const std::string& outcome) {
  std::string sid;
  {
    std::lock_guard<std::mutex> g{mtx_};
    auto i = turns_.find(token);
    if (i == turns_.end())
      return;
    sid = std::move(i->second.session_id);
    turns_.erase(i);
  }
  if (!active())
    return;
  publish(turn_event{"turn_end",
                     session_event(sid, {{"outcome", outcome}}), {}});
}

} // namespace mibyan
