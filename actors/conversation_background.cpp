// Conversation actor, part: background deliveries (how the actor is split:
// actors/conversation_internal.hpp; behaviour: docs/agent_loop.md,
// "Background deliveries").
//
// Background work of a conversation - delegate_task children started with
// `background: true`, terminal processes started with
// `notify_on_complete: true` - ends while the conversation is idle or busy
// with another turn. Its notice waits in `notices` (bounded: beyond
// delegation.max_pending_notices the oldest are merged into one) and
// becomes a user-role message at the start of the next turn, stored with
// that turn's user message. Each notice is also announced at once on the
// runtime's background board (`mibyan chat`, the live event stream).
//
// Durability: a background child's result is its own stored session
// (metadata {"background_task": true}, parent = this session). When a
// conversation starts, recover_background() delivers every such child of
// its chain that ended without its notice reaching the stored history (the
// process stopped first), and ends as "interrupted" a child a dead process
// left running. Process notices live in memory only: the processes die
// with the runtime anyway.
#include "actors/conversation_internal.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/log.hpp"
#include "storage/session_store.hpp"

namespace mibyan::conversation_detail {

namespace {

// Longest summary kept in a notice (head and tail), and per merged entry.
constexpr size_t max_summary_chars = 6000;
constexpr size_t max_goal_chars = 300;
constexpr size_t max_headline_chars = 160;
// Entries listed with their first line in one merged notice; the rest
// with their marker only.
constexpr size_t max_merged_entries = 50;

// `s` cut to at most `max` bytes on a UTF-8 boundary, keeping the head
// and the tail with a marker between.
std::string cut_middle(const std::string& s, size_t max) {
  if (s.size() <= max)
    return s;
  auto head = max * 2 / 5;
  auto tail = max - head;
  while (head > 0 && (static_cast<unsigned char>(s[head]) & 0xC0) == 0x80)
    --head;
  auto from = s.size() - tail;
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80)
    ++from;
  return s.substr(0, head) + "\n[... "
         + std::to_string(from - head) + " bytes left out ...]\n"
         + s.substr(from);
}

std::string first_line(const std::string& s, size_t max) {
  auto t = strings::trim(s);
  auto nl = t.find('\n');
  if (nl != std::string::npos)
    t = t.substr(0, nl);
  if (t.size() > max) {
    auto n = max;
    while (n > 0 && (static_cast<unsigned char>(t[n]) & 0xC0) == 0x80)
      --n;
    t = t.substr(0, n) + "...";
  }
  return t;
}

bool is_background_child(const session_info& info) {
  if (info.metadata_json.empty())
    return false;
  auto parsed = json::parse_members(info.metadata_json, {"background_task"});
  return parsed && parsed.v->is_object()
         && parsed.v->get_bool("background_task", false);
}

std::string stored_goal(const session_info& info) {
  auto parsed = json::parse_members(info.metadata_json, {"goal"});
  if (parsed && parsed.v->is_object())
    if (auto g = parsed.v->get_string("goal"); !g.empty())
      return g;
  return info.title;
}

// The last assistant text of a stored session ("" when none).
std::string stored_summary(const session_store& store, const std::string& id) {
  auto msgs = store.load_messages(id);
  if (!msgs)
    return {};
  for (auto it = msgs->rbegin(); it != msgs->rend(); ++it)
    if (it->message.role == "assistant"
        && !strings::trim(it->message.content).empty())
      return it->message.content;
  return {};
}

// A stored child's status: its end reason as delegate_task names it.
std::string stored_status(const session_info& info) {
  if (info.ended_at_ms == 0)
    return "running";
  if (info.end_reason == "delegation_done")
    return "ok";
  if (info.end_reason.rfind("delegation_failed", 0) == 0)
    return "error";
  if (info.end_reason == "cancelled")
    return "cancelled";
  return "interrupted";
}

// The error a failed child's end reason carries ("delegation_failed: E").
std::string stored_error(const session_info& info) {
  const std::string prefix = "delegation_failed: ";
  return info.end_reason.rfind(prefix, 0) == 0
           ? info.end_reason.substr(prefix.size())
           : std::string{};
}

// Whether the stored history already holds the notice of `marker`.
bool delivered(const std::vector<chat_message>& history,
               const std::string& marker) {
  for (auto& m : history)
    if (m.role == "user" && m.content.find(marker) != std::string::npos)
      return true;
  return false;
}

// Merges `b` into `a` (the older one) as entries of one notice.
void merge_into(background_notice& a, const background_notice& b,
                size_t& merged_count) {
  auto entry = [](const background_notice& n) {
    return notice_marker(n.kind, n.id) + " " + n.status + "] " + n.headline;
  };
  if (a.kind != "merged") {
    background_notice m;
    m.session_id = a.session_id;
    m.kind = "merged";
    m.id = a.id;
    m.status = "merged";
    m.at_ms = a.at_ms;
    m.text = entry(a);
    merged_count = 1;
    a = std::move(m);
  }
  // Every entry keeps its marker (a delivered marker is never delivered
  // again, recover_background); past max_merged_entries without its line.
  if (merged_count < max_merged_entries)
    a.text += "\n" + entry(b);
  else
    a.text += "\n" + notice_marker(b.kind, b.id) + " " + b.status + "]";
  ++merged_count;
  a.headline = std::to_string(merged_count) + " background events";
}

} // namespace

std::string notice_marker(const std::string& kind, const std::string& id) {
  return "[background " + std::string{kind == "delegate" ? "task" : kind} + " "
         + id + ":";
}

background_notice delegate_notice(const std::string& session_id,
                                  const std::string& task_id,
                                  const std::string& goal,
                                  const std::string& status,
                                  const std::string& summary,
                                  const std::string& error) {
  background_notice n;
  n.session_id = session_id;
  n.kind = "delegate";
  n.id = task_id;
  n.status = status;
  n.at_ms = now_ms();
  std::string what = status == "ok"            ? "finished"
                     : status == "interrupted" ? "was interrupted"
                                               : "failed";
  n.headline = what + (summary.empty() ? (error.empty() ? std::string{}
                                                        : ": " + first_line(
                                                            error,
                                                            max_headline_chars))
                                       : ": " + first_line(summary,
                                                           max_headline_chars));
  n.text = notice_marker("delegate", task_id) + " " + status + "]\n"
           + "The background subagent you started " + what + ".\nGoal: "
           + first_line(goal, max_goal_chars) + "\n";
  if (!error.empty())
    n.text += "Error: " + first_line(error, 1000) + "\n";
  n.text += "Summary:\n"
            + (summary.empty() ? std::string{"(none)"}
                               : cut_middle(summary, max_summary_chars));
  return n;
}

void queue_notice(conv_pointer self, background_notice n) {
  auto& st = self->state;
  if (n.session_id.empty())
    n.session_id = st.tool_session;
  if (n.at_ms == 0)
    n.at_ms = now_ms();
  st.deps.svc->background->announce(n);
  // The parent session was deleted: there is nowhere to deliver to. The
  // child's own session (if any) keeps its summary.
  if (st.deps.store) {
    auto info = st.deps.store->get_session(st.deps.session_id);
    if (!info && info.code == status_code::not_found) {
      MIBYAN_LOG(warning, "conversation",
                 "background " << n.kind << " " << n.id << " ended after "
                               << "session " << st.deps.session_id
                               << " was deleted; its notice is dropped");
      return;
    }
  }
  MIBYAN_LOG(info, "conversation",
             st.deps.session_id << ": background " << n.kind << " " << n.id
                                << " " << n.status);
  st.notices.push_back(std::move(n));
  auto cap
    = static_cast<size_t>(st.deps.svc->cfg.delegation.max_pending_notices);
  // Oldest merged first; the merged entry stays the oldest.
  while (st.notices.size() > cap && st.notices.size() >= 2) {
    // A merged notice's headline starts with its entry count.
    size_t count = st.notices.front().kind == "merged"
                     ? static_cast<size_t>(std::strtoull(
                       st.notices.front().headline.c_str(), nullptr, 10))
                     : 0;
    auto second = std::move(st.notices[1]);
    st.notices.erase(st.notices.begin() + 1);
    merge_into(st.notices.front(), second, count);
  }
}

std::vector<chat_message> take_notices(conv_pointer self) {
  auto& st = self->state;
  std::vector<chat_message> out;
  for (auto& n : st.notices) {
    chat_message m;
    m.role = "user";
    if (n.kind == "merged") {
      auto entries = static_cast<size_t>(
        std::strtoull(n.headline.c_str(), nullptr, 10));
      m.content = "[background: " + std::to_string(entries)
                  + " events ended while you were busy; they are merged "
                    "here, oldest first. delegate_task(action=\"status\", "
                    "id=...) gives a task's full summary.]\n"
                  + n.text;

    } else {
      m.content = n.text;
    }
    m.timestamp_ms = now_ms();
    out.push_back(std::move(m));
  }
  st.notices.clear();
  return out;
}

void recover_background(conv_pointer self) {
  auto& st = self->state;
  st.chain_ids.insert(st.deps.session_id);
  if (!st.deps.store || st.deps.depth > 0 || !st.load_error.empty())
    return;
  auto& store = *st.deps.store;
  // The chain: this session and the sessions it continues (compression).
  std::vector<std::string> chain{st.deps.session_id};
  for (int i = 0; i < 32; ++i) {
    auto info = store.get_session(chain.back());
    if (!info || info->parent_session_id.empty())
      break;
    auto parent = store.get_session(info->parent_session_id);
    if (!parent || parent->end_reason != "compression")
      break;
    chain.push_back(parent->id);
  }
  st.chain_ids.insert(chain.begin(), chain.end());
  std::vector<background_notice> found;
  for (auto& sid : chain) {
    auto kids = store.list_children(sid);
    if (!kids)
      continue;
    // A session this one continues keeps its own stored messages: a notice
    // delivered there may be summarised away in the compacted history.
    std::vector<chat_message> earlier;
    bool earlier_loaded = sid == st.deps.session_id;
    for (auto& kid : *kids) {
      auto info = store.get_session(kid);
      if (!info || !is_background_child(*info))
        continue;
      auto marker = notice_marker("delegate", kid);
      if (delivered(st.history, marker))
        continue;
      if (!earlier_loaded) {
        earlier_loaded = true;
        if (auto msgs = store.load_messages(sid))
          for (auto& m : *msgs)
            if (m.message.role == "user")
              earlier.push_back(std::move(m.message));
      }
      if (delivered(earlier, marker))
        continue;
      auto status = stored_status(*info);
      if (status == "cancelled")
        continue; // the model cancelled it; nothing to deliver
      std::string error = stored_error(*info);
      if (status == "running") {
        // A process that stopped while the child ran: it is gone.
        status = "interrupted";
        error = "the process running the subagent stopped before it "
                "finished";
        if (st.deps.writer)
          caf::anon_send(st.deps.writer, end_atom_v, kid,
                         std::string{"interrupted"});
      }
      found.push_back(delegate_notice(st.deps.session_id, kid,
                                      stored_goal(*info), status,
                                      stored_summary(store, kid), error));
      found.back().at_ms = info->ended_at_ms != 0 ? info->ended_at_ms
                                                  : info->started_at_ms;
    }
  }
  std::sort(found.begin(), found.end(),
            [](auto& a, auto& b) { return a.at_ms < b.at_ms; });
  for (auto& n : found)
    queue_notice(self, std::move(n));
}

std::optional<json::value> stored_task_status(conv_pointer self,
                                              const std::string& id) {
  auto& st = self->state;
  if (!st.deps.store)
    return std::nullopt;
  auto info = st.deps.store->get_session(id);
  if (!info || !is_background_child(*info)
      || (st.chain_ids.count(info->parent_session_id) == 0
          && info->parent_session_id != st.deps.session_id))
    return std::nullopt;
  json::value v;
  v["task_id"] = id;
  auto status = stored_status(*info);
  // Open in the store but not running here: its process stopped.
  v["status"] = status == "running" ? std::string{"interrupted"} : status;
  v["goal"] = stored_goal(*info);
  v["summary"] = stored_summary(*st.deps.store, id);
  if (auto err = stored_error(*info); !err.empty())
    v["error"] = err;
  v["api_calls"] = info->api_call_count;
  if (info->ended_at_ms != 0)
    v["duration_seconds"]
      = static_cast<double>(info->ended_at_ms - info->started_at_ms) / 1000.0;
  return v;
}

} // namespace mibyan::conversation_detail
