// File: messages/session_events.hpp
#pragma once

#include <cstdint>
#include <string>

#include "caf/meta/type_name.hpp"

#include "messages/chat.hpp"

namespace mibyan {

/// A session to create in the store. An empty id gets the default format
/// `YYYYMMDD_HHMMSS_<6 hex>`.
struct session_meta {
  std::string id;
  std::string source = "cli";
  std::string model;
  std::string provider;
  std::string cwd;
  std::string title;
  std::string parent_session_id;
  /// A JSON object as text ("" = none): what the creator records with the
  /// session, e.g. {"cron_job_id": ...} (storage/session_record.hpp).
  std::string metadata_json;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_meta& x) {
  return f(caf::meta::type_name("mibyan::session_meta"), x.id, x.source,
           x.model, x.provider, x.cwd, x.title, x.parent_session_id,
           x.metadata_json);
}

/// One message to append. `key` makes the append idempotent (the same key
/// is stored once); keys starting with '_' are never stored.
struct message_append {
  std::string session_id;
  chat_message message;
  std::string key;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, message_append& x) {
  return f(caf::meta::type_name("mibyan::message_append"), x.session_id,
           x.message, x.key);
}

/// Token usage and model calls to add to a session's counters.
struct usage_update {
  std::string session_id;
  token_usage usage;
  int64_t api_calls = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, usage_update& x) {
  return f(caf::meta::type_name("mibyan::usage_update"), x.session_id,
           x.usage, x.api_calls);
}

} // namespace mibyan
