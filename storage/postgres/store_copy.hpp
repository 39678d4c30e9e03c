// File: storage/postgres/store_copy.hpp
//
// `mibyan store copy`: moves every session with its messages, approvals,
// usage counters, stored responses, system prompt and latest kernel
// checkpoint, every scheduled job with its run history, and the per-user
// state (memory, skills, allowlist grants: storage/user_state_store.hpp)
// from one
// session store to another (LMDB to PostgreSQL or back; docs/storage.md,
// "Copying between backends").
//
// Idempotent and resumable: a session already in the destination with the
// same messages is left alone; one whose messages are a prefix of the
// source's (an interrupted copy) gets the rest; one whose messages differ
// is a conflict, reported by id and never overwritten. Sessions that exist
// only in the destination are reported too. Message ids are the
// destination's own (each backend numbers its messages); contents, keys,
// timestamps and order are kept byte for byte. A stored response of the
// Responses API points at a message id: the copy points at the message in
// the same position of the destination's session.
//
// `Src` and `Dst` are session stores (anything with session_store's
// methods). Runs on the caller's thread; blocking.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "storage/checkpoint_store.hpp"
#include "storage/prompt_store.hpp"
#include "storage/session_store.hpp"
#include "storage/user_state_store.hpp"

namespace mibyan {

struct store_copy_report {
  size_t sessions_seen = 0;
  size_t sessions_created = 0;
  size_t sessions_resumed = 0;
  size_t sessions_unchanged = 0;
  size_t messages_copied = 0;
  size_t jobs_copied = 0;
  size_t runs_copied = 0;
  size_t responses_copied = 0;
  size_t prompts_copied = 0;
  size_t checkpoints_copied = 0;
  /// Per-user documents written to the destination (new or changed).
  size_t user_docs_copied = 0;
  /// "id: why" for every session that differs between the stores.
  std::vector<std::string> conflicts;
  /// Sessions in the destination that the source does not have.
  std::vector<std::string> only_in_destination;
  /// Parent links that point at no session of the source (dropped).
  std::vector<std::string> warnings;
};

/// The side stores of both ends (each pair may be null: that kind is not
/// copied).
struct store_copy_sides {
  prompt_store* src_prompts = nullptr;
  prompt_store* dst_prompts = nullptr;
  checkpoint_store* src_checkpoints = nullptr;
  checkpoint_store* dst_checkpoints = nullptr;
  user_state_store* src_user_state = nullptr;
  user_state_store* dst_user_state = nullptr;
};

namespace store_copy_detail {

inline bool same_message(const stored_message& a, const stored_message& b) {
  const auto& x = a.message;
  const auto& y = b.message;
  if (a.key != b.key || x.role != y.role || x.content != y.content
      || x.tool_call_id != y.tool_call_id || x.tool_name != y.tool_name
      || x.reasoning != y.reasoning || x.finish_reason != y.finish_reason
      || x.timestamp_ms != y.timestamp_ms
      || x.tool_calls.size() != y.tool_calls.size())
    return false;
  for (size_t i = 0; i < x.tool_calls.size(); ++i)
    if (x.tool_calls[i].id != y.tool_calls[i].id
        || x.tool_calls[i].name != y.tool_calls[i].name
        || x.tool_calls[i].arguments != y.tool_calls[i].arguments)
      return false;
  return true;
}

inline token_usage minus(const token_usage& a, const token_usage& b) {
  token_usage d;
  d.input_tokens = std::max<int64_t>(0, a.input_tokens - b.input_tokens);
  d.output_tokens = std::max<int64_t>(0, a.output_tokens - b.output_tokens);
  d.cache_read_tokens =
    std::max<int64_t>(0, a.cache_read_tokens - b.cache_read_tokens);
  d.cache_write_tokens =
    std::max<int64_t>(0, a.cache_write_tokens - b.cache_write_tokens);
  d.reasoning_tokens =
    std::max<int64_t>(0, a.reasoning_tokens - b.reasoning_tokens);
  if (a.has_cost) {
    d.has_cost = true;
    d.cost_usd = std::max(0.0, a.cost_usd - b.cost_usd);
  }
  return d;
}

template <class S>
store_result<std::vector<session_info>> all_sessions(S& s) {
  std::vector<session_info> out;
  for (size_t offset = 0;; offset += 1000) {
    auto page = s.list_sessions(1000, offset);
    if (!page)
      return page;
    out.insert(out.end(), page->begin(), page->end());
    if (page->size() < 1000)
      return store_result<std::vector<session_info>>{std::move(out)};
  }
}

} // namespace store_copy_detail

/// Copies `src` into `dst`. `progress` (may be empty) gets a line now and
/// then. Returns the report, or the first store error that stopped the
/// copy (what was copied before it stays; running again resumes).
template <class Src, class Dst>
store_result<store_copy_report>
copy_store(Src& src, Dst& dst,
           const std::function<void(const std::string&)>& progress,
           const store_copy_sides& sides = {}) {
  using namespace store_copy_detail;
  using res = store_result<store_copy_report>;
  store_copy_report rep;
  auto sessions = all_sessions(src);
  if (!sessions)
    return res::failure(sessions.code, "copy: source: " + sessions.error);
  auto existing = all_sessions(dst);
  if (!existing)
    return res::failure(existing.code,
                        "copy: destination: " + existing.error);
  std::map<std::string, const session_info*> by_id;
  for (auto& s : *sessions)
    by_id[s.id] = &s;
  for (auto& s : *existing)
    if (by_id.count(s.id) == 0)
      rep.only_in_destination.push_back(s.id);
  std::set<std::string> done;
  auto last_report = std::chrono::steady_clock::now();
  status failed;
  // New sessions go in group commits (one transaction, one fsync, for
  // many sessions): create, messages, usage and end together.
  std::vector<store_write> group;
  std::vector<std::pair<std::string, std::vector<std::string>>> grants;
  std::vector<const session_info*> ends;
  size_t group_messages = 0;
  auto flush_group = [&]() -> bool {
    if (group.empty() && grants.empty() && ends.empty())
      return true;
    auto st = group.empty() ? status{} : dst.commit_group(group);
    if (st)
      for (auto& w : group)
        if (!w.status.ok()) {
          st = w.status;
          break;
        }
    if (!st) {
      failed = status::failure(st.code, "copy: " + st.error);
      return false;
    }
    rep.messages_copied += group_messages;
    group.clear();
    group_messages = 0;
    for (auto& [id, keys] : grants)
      if (auto a = dst.set_approvals(id, keys); !a) {
        failed = status::failure(a.code, "copy: session " + id + ": "
                                           + a.error);
        return false;
      }
    grants.clear();
    for (auto* e : ends)
      if (auto st = dst.end_session(e->id, e->end_reason, e->ended_at_ms);
          !st) {
        failed = status::failure(st.code, "copy: session " + e->id + ": "
                                            + st.error);
        return false;
      }
    ends.clear();
    return true;
  };
  // Copies one session, its parent first (create_session needs it).
  std::function<bool(const session_info&)> copy_one =
    [&](const session_info& s) -> bool {
    if (!done.insert(s.id).second)
      return true;
    std::string parent = s.parent_session_id;
    if (!parent.empty()) {
      auto p = by_id.find(parent);
      if (p == by_id.end()) {
        rep.warnings.push_back("session " + s.id + ": parent " + parent
                               + " is not in the source; link dropped");
        parent.clear();
      } else if (!copy_one(*p->second)) {
        return false;
      }
    }
    ++rep.sessions_seen;
    auto msgs = src.load_messages(s.id);
    if (!msgs) {
      failed = status::failure(msgs.code, "copy: source: " + msgs.error);
      return false;
    }
    session_info have;
    std::vector<stored_message> have_msgs;
    auto got = dst.get_session(s.id);
    if (!got && got.code != status_code::not_found) {
      failed = status::failure(got.code, "copy: destination: " + got.error);
      return false;
    }
    if (!got) {
      store_write cw;
      cw.what = store_write::kind::create;
      auto& ns = cw.create;
      ns.id = s.id;
      ns.source = s.source;
      ns.model = s.model;
      ns.provider = s.provider;
      ns.cwd = s.cwd;
      ns.title = s.title;
      ns.parent_session_id = parent;
      ns.metadata_json = s.metadata_json;
      ns.started_at_ms = s.started_at_ms;
      group.push_back(std::move(cw));
      for (auto& m : *msgs) {
        store_write aw;
        aw.what = store_write::kind::append;
        aw.append = pending_append{s.id, m.message, m.key};
        group.push_back(std::move(aw));
      }
      group_messages += msgs->size();
      if (s.api_call_count > 0 || s.tokens.input_tokens > 0
          || s.tokens.output_tokens > 0 || s.tokens.cache_read_tokens > 0
          || s.tokens.cache_write_tokens > 0 || s.tokens.reasoning_tokens > 0
          || s.tokens.has_cost) {
        store_write uw;
        uw.what = store_write::kind::usage;
        uw.session_id = s.id;
        uw.usage = s.tokens;
        uw.api_calls = s.api_call_count;
        group.push_back(std::move(uw));
      }
      auto approvals = src.get_approvals(s.id);
      if (approvals && !approvals->empty())
        grants.emplace_back(s.id, std::move(*approvals));
      ++rep.sessions_created;
      // A group stamps an end with its own clock: the end goes on its
      // own, at the source's time, after the group.
      if (s.ended_at_ms != 0)
        ends.push_back(&s);
      return group.size() < 2000 || flush_group();
    } else {
      have = std::move(*got);
      if (!flush_group())
        return false;
      auto hm = dst.load_messages(s.id);
      if (!hm) {
        failed = status::failure(hm.code, "copy: destination: " + hm.error);
        return false;
      }
      have_msgs = std::move(*hm);
      std::string why;
      if (have_msgs.size() > msgs->size())
        why = "the destination has " + std::to_string(have_msgs.size())
              + " messages, the source " + std::to_string(msgs->size());
      for (size_t i = 0; why.empty() && i < have_msgs.size(); ++i)
        if (!same_message(have_msgs[i], (*msgs)[i]))
          why = "message " + std::to_string(i + 1) + " differs";
      if (why.empty() && (have.started_at_ms != s.started_at_ms
                          || have.title != s.title))
        why = "the session's start time or title differs";
      if (!why.empty()) {
        rep.conflicts.push_back(s.id + ": " + why);
        return true;
      }
    }
    // The messages the destination lacks, in batches.
    std::vector<pending_append> batch;
    auto flush = [&]() -> bool {
      if (batch.empty())
        return true;
      auto r = dst.append_batch(batch);
      if (!r) {
        failed = status::failure(r.code, "copy: session " + s.id + ": "
                                           + r.error);
        return false;
      }
      rep.messages_copied += batch.size();
      batch.clear();
      return true;
    };
    for (size_t i = have_msgs.size(); i < msgs->size(); ++i) {
      batch.push_back(pending_append{s.id, (*msgs)[i].message,
                                     (*msgs)[i].key});
      if (batch.size() == 500 && !flush())
        return false;
    }
    if (!flush())
      return false;
    if (have_msgs.size() < msgs->size())
      ++rep.sessions_resumed;
    else
      ++rep.sessions_unchanged;
    // Counters, approvals and the end, as the source has them.
    auto delta = minus(s.tokens, have.tokens);
    int64_t calls = std::max<int64_t>(0, s.api_call_count
                                           - have.api_call_count);
    if (calls > 0 || delta.input_tokens > 0 || delta.output_tokens > 0
        || delta.cache_read_tokens > 0 || delta.cache_write_tokens > 0
        || delta.reasoning_tokens > 0 || (delta.has_cost && !have.tokens.has_cost)
        || delta.cost_usd > 0)
      if (auto st = dst.add_usage(s.id, delta, calls); !st) {
        failed = status::failure(st.code, "copy: session " + s.id + ": "
                                            + st.error);
        return false;
      }
    auto approvals = src.get_approvals(s.id);
    if (approvals && !approvals->empty())
      if (auto st = dst.set_approvals(s.id, *approvals); !st) {
        failed = status::failure(st.code, "copy: session " + s.id + ": "
                                            + st.error);
        return false;
      }
    if (s.ended_at_ms != 0 && have.ended_at_ms == 0)
      if (auto st = dst.end_session(s.id, s.end_reason, s.ended_at_ms);
          !st) {
        failed = status::failure(st.code, "copy: session " + s.id + ": "
                                            + st.error);
        return false;
      }
    return true;
  };
  // Oldest first: parents usually come before their children anyway.
  for (auto it = sessions->rbegin(); it != sessions->rend(); ++it) {
    if (!copy_one(*it))
      return res{failed};
    auto now = std::chrono::steady_clock::now();
    if (progress && now - last_report > std::chrono::seconds{1}) {
      last_report = now;
      progress("copied " + std::to_string(rep.sessions_seen) + "/"
               + std::to_string(sessions->size()) + " sessions, "
               + std::to_string(rep.messages_copied + group_messages)
               + " messages");
    }
  }
  if (!flush_group())
    return res{failed};
  std::set<std::string> in_conflict;
  for (auto& c : rep.conflicts)
    in_conflict.insert(c.substr(0, c.find(": ")));
  // Per session: its responses (their message ids mapped by position), its
  // system prompt and its latest kernel checkpoint.
  for (auto& s : *sessions) {
    if (in_conflict.count(s.id) > 0)
      continue;
    auto responses = src.list_responses(s.id);
    if (!responses)
      return res::failure(responses.code,
                          "copy: source: " + responses.error);
    if (!responses->empty()) {
      auto sm = src.load_messages(s.id);
      auto dm = dst.load_messages(s.id);
      if (!sm)
        return res::failure(sm.code, "copy: source: " + sm.error);
      if (!dm)
        return res::failure(dm.code, "copy: destination: " + dm.error);
      for (auto& r : *responses) {
        auto copy = r;
        if (r.last_message_id != 0) {
          size_t i = 0;
          while (i < sm->size() && (*sm)[i].id != r.last_message_id)
            ++i;
          if (i == sm->size() || i >= dm->size()) {
            rep.warnings.push_back("response " + r.id + " of session "
                                   + s.id + " points at no message of it; "
                                            "not copied");
            continue;
          }
          copy.last_message_id = (*dm)[i].id;
        }
        if (auto st = dst.put_response(copy); !st)
          return res::failure(st.code, "copy: response " + r.id + ": "
                                         + st.error);
        ++rep.responses_copied;
      }
    }
    if (sides.src_prompts != nullptr && sides.dst_prompts != nullptr) {
      auto hash = sides.src_prompts->hash_of(s.id);
      if (!hash && hash.code != status_code::not_found)
        return res::failure(hash.code, "copy: source: " + hash.error);
      if (hash) {
        auto text = sides.src_prompts->get(*hash);
        if (!text)
          return res::failure(text.code, "copy: source: " + text.error);
        auto have = sides.dst_prompts->hash_of(s.id);
        if (!have || *have != *hash) {
          auto put = sides.dst_prompts->put(s.id, *text);
          if (!put)
            return res::failure(put.code, "copy: prompt of session " + s.id
                                            + ": " + put.error);
          ++rep.prompts_copied;
        }
      }
    }
    if (sides.src_checkpoints != nullptr
        && sides.dst_checkpoints != nullptr) {
      auto ck = sides.src_checkpoints->latest(s.id);
      if (!ck)
        return res::failure(ck.code, "copy: source: " + ck.error);
      if (*ck) {
        // A seq not above the destination's is ignored by put: a copy
        // run again changes nothing.
        auto have = sides.dst_checkpoints->latest(s.id);
        if (!have)
          return res::failure(have.code, "copy: destination: " + have.error);
        if (!*have || (*have)->seq < (*ck)->seq) {
          if (auto st = sides.dst_checkpoints->put(s.id, (*ck)->seq,
                                                   (*ck)->bytes);
              !st)
            return res::failure(st.code, "copy: checkpoint of session "
                                           + s.id + ": " + st.error);
          ++rep.checkpoints_copied;
        }
      }
    }
  }
  // Scheduled jobs and their runs (oldest run first, so the order holds).
  auto jobs = src.list_cron_jobs(false);
  if (!jobs)
    return res::failure(jobs.code, "copy: source: " + jobs.error);
  for (auto& d : jobs->damaged)
    rep.warnings.push_back("cron " + d + "; not copied");
  for (auto& j : jobs->jobs) {
    if (auto st = dst.put_cron_job(j); !st)
      return res::failure(st.code, "copy: job " + j.id + ": " + st.error);
    ++rep.jobs_copied;
    auto runs = src.list_cron_runs(j.id, 1000000, 0, nullptr);
    if (!runs)
      return res::failure(runs.code, "copy: source: " + runs.error);
    for (auto it = runs->rbegin(); it != runs->rend(); ++it) {
      if (auto st = dst.put_cron_run(*it, 0); !st)
        return res::failure(st.code, "copy: run " + it->id + ": "
                                       + st.error);
      ++rep.runs_copied;
    }
  }
  // Per-user state: each document the destination lacks or holds with
  // other bytes is written there, kind by kind in one batch per 256
  // documents; documents only the destination has are kept (the copy never
  // deletes).
  if (sides.src_user_state != nullptr && sides.dst_user_state != nullptr) {
    for (auto kind : user_state_kinds()) {
      auto docs = sides.src_user_state->list(kind, true);
      if (!docs)
        return res::failure(docs.code, "copy: source: " + docs.error);
      auto have = sides.dst_user_state->list(kind, true);
      if (!have)
        return res::failure(have.code, "copy: destination: " + have.error);
      std::map<std::string, const user_doc*> dst_docs;
      for (auto& d : *have)
        dst_docs[d.name] = &d;
      std::vector<user_doc_write> batch;
      auto flush = [&]() -> store_status {
        if (batch.empty())
          return {};
        auto w = sides.dst_user_state->write(kind, batch);
        if (!w)
          return w.get_status();
        rep.user_docs_copied += batch.size();
        batch.clear();
        return {};
      };
      for (auto& d : *docs) {
        auto it = dst_docs.find(d.name);
        if (it != dst_docs.end() && it->second->bytes == d.bytes)
          continue;
        user_doc_write w;
        w.name = d.name;
        w.bytes = d.bytes;
        w.expected = it == dst_docs.end() ? 0 : it->second->version;
        batch.push_back(std::move(w));
        if (batch.size() == 256)
          if (auto st = flush(); !st)
            return res::failure(st.code, std::string{"copy: "}
                                           + to_string(kind) + ": "
                                           + st.error);
      }
      if (auto st = flush(); !st)
        return res::failure(st.code, std::string{"copy: "} + to_string(kind)
                                       + ": " + st.error);
    }
  }
  if (progress)
    progress("copied " + std::to_string(rep.sessions_seen) + "/"
             + std::to_string(sessions->size()) + " sessions, "
             + std::to_string(rep.messages_copied) + " messages");
  return res{std::move(rep)};
}

} // namespace mibyan
