#include "storage/session_store.hpp"

#include "storage/session_id.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <unordered_map>

#include "base/json.hpp"
#include "storage/byte_codec.hpp"
#include "storage/space_reserve.hpp"

namespace mibyan {

namespace {

constexpr const char* version_key = "schema_version";
constexpr const char* next_id_key = "next_message_id";
constexpr size_t max_search_limit = 1000;

// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n)
      return i;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80)
        return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800)
                    || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

// "" if `s` is valid UTF-8, else a message naming the field and offset.
std::string check_utf8(const char* field, std::string_view s) {
  auto at = invalid_utf8_at(s);
  if (at == std::string_view::npos)
    return {};
  return std::string{field} + " is not valid UTF-8 (byte "
         + std::to_string(at) + "); convert or sanitize it before storing";
}

bool valid_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'
         || c == ':' || c == '@';
}

std::string check_session_id(const std::string& id) {
  if (id.empty())
    return "session id is empty";
  if (id.size() > session_store::max_id_bytes)
    return "session id is " + std::to_string(id.size())
           + " bytes; at most "
           + std::to_string(session_store::max_id_bytes) + " allowed";
  for (char c : id)
    if (!valid_id_char(c))
      return "session id '" + json::sanitize_utf8(id)
             + "' may only contain letters, digits and _-.:@";
  return {};
}

std::string sub_key(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + 1 + b.size());
  k.append(a.data(), a.size());
  k.push_back('\0');
  k.append(b.data(), b.size());
  return k;
}

std::string msg_key(std::string_view session, uint64_t id) {
  std::string k{session};
  k.push_back('\0');
  codec::put_be64(k, id);
  return k;
}

std::string time_key(int64_t started, std::string_view id) {
  std::string k;
  codec::put_be64(k, static_cast<uint64_t>(std::max<int64_t>(started, 0)));
  k.append(id.data(), id.size());
  return k;
}

struct cursor_guard {
  MDB_cursor* c = nullptr;
  ~cursor_guard() {
    if (c != nullptr)
      mdb_cursor_close(c);
  }
};

// Visits every entry whose key starts with `prefix`; `fn(key, value)`
// returns 0 to go on, anything else stops the walk with that code.
template <class F>
int scan_prefix(MDB_txn* txn, MDB_dbi dbi, std::string_view prefix, F&& fn) {
  cursor_guard cur;
  int rc = mdb_cursor_open(txn, dbi, &cur.c);
  if (rc != 0)
    return rc;
  MDB_val k = lmdb_env::val(prefix);
  MDB_val v;
  for (rc = mdb_cursor_get(cur.c, &k, &v,
                           prefix.empty() ? MDB_FIRST : MDB_SET_RANGE);
       rc == 0; rc = mdb_cursor_get(cur.c, &k, &v, MDB_NEXT)) {
    auto key = lmdb_env::view(k);
    if (key.substr(0, prefix.size()) != prefix)
      return 0;
    if (int r = fn(key, lmdb_env::view(v)); r != 0)
      return r;
  }
  return rc == MDB_NOTFOUND ? 0 : rc;
}

int read_session(MDB_txn* txn, MDB_dbi dbi, const std::string& id,
                 session_info& out, std::string& error) {
  std::string_view v;
  int rc = lmdb_env::get(txn, dbi, id, v);
  if (rc == MDB_NOTFOUND) {
    error = "session '" + id + "' does not exist";
    return lmdb_env::missing_error;
  }
  if (rc != 0) {
    error = "read session '" + id + "'";
    return rc;
  }
  if (!decode_session(v, out, error)) {
    error = "session '" + id + "': " + error;
    return lmdb_env::user_error;
  }
  return 0;
}

int write_session(MDB_txn* txn, MDB_dbi dbi, const session_info& s,
                  std::string& error) {
  int rc = lmdb_env::put(txn, dbi, s.id, encode_session(s));
  if (rc != 0)
    error = "write session '" + s.id + "'";
  return rc;
}

// Validates a message before any transaction starts.
std::string check_message(const chat_message& m, size_t max_bytes) {
  if (m.role.empty())
    return "message role is empty; use system, user, assistant or tool";
  if (fts_role_of(m.role) == fts_role::other)
    return "message role '" + json::sanitize_utf8(m.role.substr(0, 40))
           + "' is not one of system, user, assistant, tool";
  if (m.role == "tool" && m.tool_call_id.empty())
    return "a tool message needs the tool_call_id of the call it answers";
  if (!m.tool_calls.empty() && m.role != "assistant")
    return "only assistant messages carry tool_calls (role is " + m.role
           + ")";
  size_t total = m.content.size() + m.reasoning.size() + m.tool_name.size()
                 + m.tool_call_id.size() + m.finish_reason.size();
  for (auto& c : m.tool_calls)
    total += c.id.size() + c.name.size() + c.arguments.size();
  if (total > max_bytes)
    return "message is " + std::to_string(total) + " bytes; the limit is "
           + std::to_string(max_bytes)
           + " (truncate the content or store it in a file)";
  std::string err;
  if (!(err = check_utf8("content", m.content)).empty()
      || !(err = check_utf8("reasoning", m.reasoning)).empty()
      || !(err = check_utf8("tool_name", m.tool_name)).empty()
      || !(err = check_utf8("tool_call_id", m.tool_call_id)).empty()
      || !(err = check_utf8("finish_reason", m.finish_reason)).empty())
    return err;
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    auto& c = m.tool_calls[i];
    auto which = "tool_calls[" + std::to_string(i) + "]";
    if (c.id.empty() || c.name.empty())
      return which + " needs an id and a function name";
    if (!(err = check_utf8((which + ".id").c_str(), c.id)).empty()
        || !(err = check_utf8((which + ".name").c_str(), c.name)).empty()
        || !(err = check_utf8((which + ".arguments").c_str(), c.arguments))
              .empty())
      return err;
  }
  return {};
}

std::string check_text_field(const char* field, const std::string& s,
                             size_t max) {
  if (s.size() > max)
    return std::string{field} + " is " + std::to_string(s.size())
           + " bytes; at most " + std::to_string(max) + " allowed";
  return check_utf8(field, s);
}

} // namespace

// -- open and migrate ---------------------------------------------------------

std::string session_store::default_dir(const std::string& home) {
  return home + "/sessions";
}

store_result<std::unique_ptr<session_store>>
session_store::open(session_store_options opts) {
  using result = store_result<std::unique_ptr<session_store>>;
  lmdb_options lo;
  lo.dir = opts.dir;
  lo.read_only = opts.read_only;
  lo.map_size = opts.map_size;
  auto env = lmdb_env::open(lo);
  if (!env)
    return result::failure(env.code, "open session store: " + env.error);
  std::unique_ptr<session_store> self{new session_store};
  self->opts_ = std::move(opts);
  self->env_ = std::move(*env);
  struct named {
    const char* name;
    MDB_dbi* dbi;
  };
  named dbis[] = {{"meta", &self->meta_},
                  {"sessions", &self->sessions_},
                  {"sessions_by_time", &self->by_time_},
                  {"children", &self->children_},
                  {"msgs", &self->msgs_},
                  {"msg_by_id", &self->msg_by_id_},
                  {"msg_keys", &self->msg_keys_}};
  for (auto& d : dbis) {
    auto r = self->env_->open_dbi(d.name);
    if (!r)
      return result::failure(r.code, "open session store: " + r.error);
    *d.dbi = *r;
  }
  if (auto r = self->env_->open_dbi("approvals"); r) {
    self->approvals_ = *r;
    self->has_approvals_ = true;
  } else if (!self->opts_.read_only) {
    return result::failure("open session store: " + r.error);
  }
  auto fts = fts_index::open(*self->env_);
  if (!fts)
    return result::failure(fts.code, "open session store: " + fts.error);
  self->fts_ = *fts;
  if (auto st = self->migrate(); !st)
    return result{st};
  // Best effort: on a full disk the reserve is recreated by a later open.
  if (!self->opts_.read_only)
    (void) ensure_reserve(self->env_->dir());
  return result{std::move(self)};
}

store_status session_store::migrate() {
  int found = 0;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      int rc = lmdb_env::get(txn, meta_, version_key, v);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc != 0)
        return rc;
      found = std::atoi(std::string{v}.c_str());
      if (found <= 0 && v != "0") {
        error = "schema version '" + std::string{v} + "' is unreadable";
        return lmdb_env::user_error;
      }
      return 0;
    },
    "open session store: read schema version");
  if (!st)
    return st;
  if (found > schema_version_current)
    return store_status::failure(status_code::data_corrupt,
      "open session store: schema version " + std::to_string(found)
      + " is newer than this build supports ("
      + std::to_string(schema_version_current) + "); upgrade mibyan");
  schema_version_ = found;
  if (opts_.read_only || found == schema_version_current)
    return {};
  // Each step runs in its own transaction with its version bump, so an
  // interrupted migration resumes at the failed step. Version 0 is a store
  // created before versioning (or a fresh one): the layout of version 1
  // is a superset, so the step only records the version.
  for (int v = found; v < schema_version_current; ++v) {
    auto step = env_->write(
      [&](MDB_txn* txn, std::string& error) {
        if (opts_.on_migrate)
          opts_.on_migrate(v, v + 1);
        int rc = lmdb_env::put(txn, meta_, version_key,
                               std::to_string(v + 1));
        if (rc != 0)
          error = "write schema version";
        return rc;
      },
      "open session store: migrate schema");
    if (!step)
      return step;
    schema_version_ = v + 1;
  }
  return {};
}

int64_t session_store::now() const {
  if (opts_.now_ms)
    return opts_.now_ms();
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

// -- sessions -----------------------------------------------------------------

store_result<session_info>
session_store::create_session(const new_session& ns) {
  using result = store_result<session_info>;
  const char* what = "create_session";
  session_info s;
  s.started_at_ms = ns.started_at_ms > 0 ? ns.started_at_ms : now();
  if (!ns.id.empty()) {
    if (auto err = check_session_id(ns.id); !err.empty())
      return result::failure(status_code::invalid_argument, std::string{what} + ": " + err);
    s.id = ns.id;
  }
  if (!ns.parent_session_id.empty()) {
    if (auto err = check_session_id(ns.parent_session_id); !err.empty())
      return result::failure(status_code::invalid_argument, std::string{what} + ": parent " + err);
  }
  struct field {
    const char* name;
    const std::string* value;
  };
  for (auto f : {field{"source", &ns.source}, field{"model", &ns.model},
                 field{"provider", &ns.provider}, field{"cwd", &ns.cwd},
                 field{"title", &ns.title}}) {
    size_t max = f.value == &ns.cwd ? 4096 : max_title_bytes;
    if (auto err = check_text_field(f.name, *f.value, max); !err.empty())
      return result::failure(status_code::invalid_argument, std::string{what} + ": " + err);
  }
  s.source = ns.source;
  s.model = ns.model;
  s.provider = ns.provider;
  s.cwd = ns.cwd;
  s.title = ns.title;
  s.parent_session_id = ns.parent_session_id;
  std::random_device rd;
  bool generated = s.id.empty();
  auto st = env_->write(
    [&](MDB_txn* txn, std::string& error) {
      std::string_view v;
      if (generated) {
        // YYYYMMDD_HHMMSS_<6 hex>, local time; retry on a collision.
        for (int attempt = 0;; ++attempt) {
          s.id = format_session_id(s.started_at_ms, rd());
          int rc = lmdb_env::get(txn, sessions_, s.id, v);
          if (rc == MDB_NOTFOUND)
            break;
          if (rc != 0 || attempt > 64) {
            error = "generate a session id";
            return rc != 0 ? rc : lmdb_env::user_error;
          }
        }
      } else {
        int rc = lmdb_env::get(txn, sessions_, s.id, v);
        if (rc == 0) {
          error = "session '" + s.id + "' already exists";
          return lmdb_env::user_error;
        }
        if (rc != MDB_NOTFOUND)
          return rc;
      }
      if (!s.parent_session_id.empty()) {
        if (s.parent_session_id == s.id) {
          error = "a session cannot be its own parent";
          return lmdb_env::user_error;
        }
        int rc = lmdb_env::get(txn, sessions_, s.parent_session_id, v);
        if (rc == MDB_NOTFOUND) {
          error = "parent session '" + s.parent_session_id
                  + "' does not exist";
          return lmdb_env::missing_error;
        }
        if (rc == 0)
          rc = lmdb_env::put(txn, children_,
                             sub_key(s.parent_session_id, s.id), {});
        if (rc != 0) {
          error = "link to parent";
          return rc;
        }
      }
      int rc = write_session(txn, sessions_, s, error);
      if (rc == 0 && (rc = lmdb_env::put(txn, by_time_,
                                         time_key(s.started_at_ms, s.id),
                                         {}))
                       != 0)
        error = "index session start time";
      return rc;
    },
    what);
  if (!st)
    return result{st};
  return result{s};
}

store_result<session_info>
session_store::get_session(const std::string& id) const {
  using result = store_result<session_info>;
  if (auto err = check_session_id(id); !err.empty())
    return result::failure(status_code::invalid_argument, "get_session: " + err);
  session_info s;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      return read_session(txn, sessions_, id, s, error);
    },
    "get_session");
  if (!st)
    return result{st};
  return result{s};
}

store_result<std::vector<session_info>>
session_store::list_sessions(size_t limit, size_t offset) const {
  using result = store_result<std::vector<session_info>>;
  std::vector<session_info> out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out.clear();
      cursor_guard cur;
      int rc = mdb_cursor_open(txn, by_time_, &cur.c);
      if (rc != 0)
        return rc;
      MDB_val k;
      MDB_val v;
      size_t skipped = 0;
      for (rc = mdb_cursor_get(cur.c, &k, &v, MDB_LAST);
           rc == 0 && out.size() < limit;
           rc = mdb_cursor_get(cur.c, &k, &v, MDB_PREV)) {
        auto key = lmdb_env::view(k);
        if (key.size() <= 8)
          continue;
        if (skipped < offset) {
          ++skipped;
          continue;
        }
        session_info s;
        if (int r = read_session(txn, sessions_, std::string{key.substr(8)},
                                 s, error);
            r != 0)
          return r;
        out.push_back(std::move(s));
      }
      return rc == MDB_NOTFOUND || rc == 0 ? 0 : rc;
    },
    "list_sessions");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_status session_store::update_session(
  const std::string& id, const char* what,
  const std::function<std::string(session_info&)>& fn) {
  if (auto err = check_session_id(id); !err.empty())
    return store_status::failure(status_code::invalid_argument, std::string{what} + ": " + err);
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      session_info s;
      if (int rc = read_session(txn, sessions_, id, s, error); rc != 0)
        return rc;
      if (auto err = fn(s); !err.empty()) {
        error = err;
        return lmdb_env::user_error;
      }
      return write_session(txn, sessions_, s, error);
    },
    what);
}

store_status session_store::set_title(const std::string& id,
                                      const std::string& title) {
  if (auto err = check_text_field("title", title, max_title_bytes);
      !err.empty())
    return store_status::failure(status_code::invalid_argument, "set_title: " + err);
  return update_session(id, "set_title", [&](session_info& s) {
    s.title = title;
    return std::string{};
  });
}

store_status session_store::end_session(const std::string& id,
                                        const std::string& reason,
                                        int64_t ended_at_ms) {
  if (auto err = check_text_field("end reason", reason, max_title_bytes);
      !err.empty())
    return store_status::failure(status_code::invalid_argument, "end_session: " + err);
  int64_t at = ended_at_ms > 0 ? ended_at_ms : now();
  return update_session(id, "end_session", [&](session_info& s) {
    if (s.ended_at_ms == 0) {
      s.ended_at_ms = at;
      s.end_reason = reason;
    }
    return std::string{};
  });
}

store_status session_store::add_usage(const std::string& id,
                                      const token_usage& u,
                                      int64_t api_calls) {
  if (api_calls < 0 || u.input_tokens < 0 || u.output_tokens < 0
      || u.cache_read_tokens < 0 || u.cache_write_tokens < 0
      || u.reasoning_tokens < 0)
    return store_status::failure(status_code::invalid_argument, "add_usage: counts must not be negative");
  return update_session(id, "add_usage", [&](session_info& s) {
    s.api_call_count += api_calls;
    s.tokens.input_tokens += u.input_tokens;
    s.tokens.output_tokens += u.output_tokens;
    s.tokens.cache_read_tokens += u.cache_read_tokens;
    s.tokens.cache_write_tokens += u.cache_write_tokens;
    s.tokens.reasoning_tokens += u.reasoning_tokens;
    return std::string{};
  });
}

store_status session_store::delete_session(const std::string& id) {
  if (auto err = check_session_id(id); !err.empty())
    return store_status::failure(status_code::invalid_argument, "delete_session: " + err);
  // The reserve's blocks pay for the pages LMDB copies while deleting, so
  // a delete works on a full disk (storage/space_reserve.hpp).
  release_reserve(env_->dir());
  auto st = delete_session_txn(id);
  (void) ensure_reserve(env_->dir());
  return st;
}

store_status session_store::delete_session_txn(const std::string& id) {
  return env_->write(
    [&](MDB_txn* txn, std::string& error) {
      session_info s;
      if (int rc = read_session(txn, sessions_, id, s, error); rc != 0)
        return rc;
      // Collect first: deleting while a cursor walks the same database
      // would need cursor-relative deletes.
      std::vector<std::pair<std::string, uint64_t>> msgs;  // key, id
      std::vector<std::string> texts;
      int rc = scan_prefix(txn, msgs_, sub_key(id, ""),
                           [&](std::string_view k, std::string_view v) {
                             stored_message m;
                             if (!decode_message(v, m))
                               return static_cast<int>(MDB_CORRUPTED);
                             msgs.emplace_back(std::string{k}, m.id);
                             texts.push_back(indexed_text(m.message));
                             return 0;
                           });
      if (rc != 0) {
        error = "read messages";
        return rc;
      }
      for (size_t i = 0; i < msgs.size(); ++i) {
        if ((rc = fts_.remove(txn, msgs[i].second, texts[i], error)) != 0)
          return rc;
        rc = lmdb_env::del(txn, msgs_, msgs[i].first);
        if (rc == 0)
          rc = lmdb_env::del(txn, msg_by_id_, codec::be64(msgs[i].second));
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "delete message " + std::to_string(msgs[i].second);
          return rc;
        }
      }
      std::vector<std::string> keys;
      rc = scan_prefix(txn, msg_keys_, sub_key(id, ""),
                       [&](std::string_view k, std::string_view) {
                         keys.emplace_back(k);
                         return 0;
                       });
      for (size_t i = 0; rc == 0 && i < keys.size(); ++i)
        rc = lmdb_env::del(txn, msg_keys_, keys[i]);
      if (rc != 0) {
        error = "delete idempotency keys";
        return rc;
      }
      if (!s.parent_session_id.empty()) {
        rc = lmdb_env::del(txn, children_, sub_key(s.parent_session_id, id));
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "unlink from parent";
          return rc;
        }
      }
      rc = lmdb_env::del(txn, by_time_, time_key(s.started_at_ms, id));
      if (rc != 0 && rc != MDB_NOTFOUND) {
        error = "delete start-time entry";
        return rc;
      }
      if (has_approvals_) {
        rc = lmdb_env::del(txn, approvals_, id);
        if (rc != 0 && rc != MDB_NOTFOUND) {
          error = "delete approvals";
          return rc;
        }
      }
      if ((rc = lmdb_env::del(txn, sessions_, id)) != 0)
        error = "delete session row";
      return rc;
    },
    "delete_session");
}

// -- approvals ----------------------------------------------------------------

store_result<std::vector<std::string>>
session_store::get_approvals(const std::string& id) const {
  using result = store_result<std::vector<std::string>>;
  if (auto err = check_session_id(id); !err.empty())
    return result::failure("get_approvals: " + err);
  std::vector<std::string> keys;
  if (!has_approvals_)
    return result{keys};
  auto st = env_->read(
    [&](MDB_txn* txn, std::string&) {
      std::string_view v;
      int rc = lmdb_env::get(txn, approvals_, id, v);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc != 0)
        return rc;
      size_t pos = 0;
      while (pos < v.size()) {
        auto nl = v.find('\n', pos);
        if (nl == std::string_view::npos)
          nl = v.size();
        if (nl > pos)
          keys.emplace_back(v.substr(pos, nl - pos));
        pos = nl + 1;
      }
      return 0;
    },
    "get_approvals");
  if (!st)
    return result::failure(st.error);
  return result{keys};
}

store_status session_store::set_approvals(const std::string& id,
                                          const std::vector<std::string>& keys) {
  if (auto err = check_session_id(id); !err.empty())
    return store_status::failure("set_approvals: " + err);
  if (!has_approvals_)
    return store_status::failure("set_approvals: the store is read-only");
  if (keys.size() > 256)
    return store_status::failure("set_approvals: more than 256 keys");
  std::string value;
  for (auto& k : keys) {
    if (k.empty() || k.size() > 200 || k.find('\n') != std::string::npos)
      return store_status::failure("set_approvals: invalid key");
    value += k + "\n";
  }
  return env_->write(
    [&](MDB_txn* txn, std::string&) {
      if (value.empty()) {
        int rc = lmdb_env::del(txn, approvals_, id);
        return rc == MDB_NOTFOUND ? 0 : rc;
      }
      return lmdb_env::put(txn, approvals_, id, value);
    },
    "set_approvals");
}

// -- messages -----------------------------------------------------------------

store_result<append_outcome>
session_store::append_message(const std::string& session_id,
                              const chat_message& m, const std::string& key) {
  auto r = append_batch({pending_append{session_id, m, key}});
  if (!r) {
    std::string_view prefix = "append_batch";
    auto err = r.error;
    if (err.compare(0, prefix.size(), prefix) == 0)
      err.replace(0, prefix.size(), "append_message");
    return store_result<append_outcome>::failure(r.code, err);
  }
  return store_result<append_outcome>{r->front()};
}

store_result<std::vector<append_outcome>>
session_store::append_batch(const std::vector<pending_append>& batch) {
  using result = store_result<std::vector<append_outcome>>;
  const char* what = "append_batch";
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& p = batch[i];
    auto prefix = batch.size() == 1
                    ? std::string{what} + ": "
                    : std::string{what} + ": message " + std::to_string(i)
                        + ": ";
    if (auto err = check_session_id(p.session_id); !err.empty())
      return result::failure(status_code::invalid_argument, prefix + err);
    if (auto err = check_message(p.message, opts_.max_message_bytes);
        !err.empty())
      return result::failure(status_code::invalid_argument, prefix + err);
    if (p.key.size() > max_key_bytes)
      return result::failure(status_code::invalid_argument, prefix + "idempotency key is longer than "
                             + std::to_string(max_key_bytes) + " bytes");
    if (p.key.find('\0') != std::string::npos)
      return result::failure(status_code::invalid_argument, prefix + "idempotency key contains a NUL byte");
  }
  std::vector<append_outcome> outcomes;
  int64_t stamp = now();
  auto st = env_->write(
    [&](MDB_txn* txn, std::string& error) {
      // Runs again from scratch if the map had to grow.
      outcomes.assign(batch.size(), append_outcome{});
      std::map<std::string, session_info> touched;
      std::map<std::string, uint64_t> keys_in_batch;
      uint64_t next_id = 1;
      std::string_view v;
      int rc = lmdb_env::get(txn, meta_, next_id_key, v);
      if (rc == 0 && v.size() == 8)
        next_id = codec::read_be64(v.data());
      else if (rc != MDB_NOTFOUND) {
        error = "read next message id";
        return rc != 0 ? rc : static_cast<int>(MDB_CORRUPTED);
      }
      for (size_t i = 0; i < batch.size(); ++i) {
        auto& p = batch[i];
        auto& out = outcomes[i];
        if (!p.key.empty() && p.key.front() == '_') {
          out.skipped = true;
          continue;
        }
        auto it = touched.find(p.session_id);
        if (it == touched.end()) {
          session_info s;
          if ((rc = read_session(txn, sessions_, p.session_id, s, error))
              != 0)
            return rc;
          it = touched.emplace(p.session_id, std::move(s)).first;
        }
        std::string idem;
        if (!p.key.empty()) {
          idem = sub_key(p.session_id, p.key);
          if (auto dup = keys_in_batch.find(idem);
              dup != keys_in_batch.end()) {
            out.id = dup->second;
            out.duplicate = true;
            continue;
          }
          rc = lmdb_env::get(txn, msg_keys_, idem, v);
          if (rc == 0 && v.size() == 8) {
            out.id = codec::read_be64(v.data());
            out.duplicate = true;
            continue;
          }
          if (rc != MDB_NOTFOUND) {
            error = "read idempotency key";
            return rc != 0 ? rc : static_cast<int>(MDB_CORRUPTED);
          }
        }
        stored_message sm;
        sm.id = next_id++;
        sm.session_id = p.session_id;
        sm.key = p.key;
        sm.message = p.message;
        if (sm.message.timestamp_ms == 0)
          sm.message.timestamp_ms = stamp;
        rc = lmdb_env::put(txn, msgs_, msg_key(p.session_id, sm.id),
                           encode_message(sm));
        if (rc == 0)
          rc = lmdb_env::put(txn, msg_by_id_, codec::be64(sm.id),
                             p.session_id, MDB_APPEND);
        if (rc == 0 && !idem.empty())
          rc = lmdb_env::put(txn, msg_keys_, idem, codec::be64(sm.id));
        if (rc != 0) {
          error = "write message";
          return rc;
        }
        if ((rc = fts_.add(txn, sm.id, fts_role_of(p.message.role),
                           indexed_text(p.message), error))
            != 0)
          return rc;
        if (!idem.empty())
          keys_in_batch.emplace(idem, sm.id);
        it->second.message_count += 1;
        it->second.tool_call_count
          += static_cast<int64_t>(p.message.tool_calls.size());
        out.id = sm.id;
      }
      for (auto& entry : touched)
        if ((rc = write_session(txn, sessions_, entry.second, error)) != 0)
          return rc;
      rc = lmdb_env::put(txn, meta_, next_id_key, codec::be64(next_id));
      if (rc != 0)
        error = "write next message id";
      return rc;
    },
    what);
  if (!st)
    return result{st};
  return result{std::move(outcomes)};
}

store_result<std::vector<stored_message>>
session_store::load_messages(const std::string& session_id) const {
  using result = store_result<std::vector<stored_message>>;
  if (auto err = check_session_id(session_id); !err.empty())
    return result::failure(status_code::invalid_argument, "load_messages: " + err);
  std::vector<stored_message> out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out.clear();
      session_info s;
      if (int rc = read_session(txn, sessions_, session_id, s, error);
          rc != 0)
        return rc;
      int rc = scan_prefix(txn, msgs_, sub_key(session_id, ""),
                           [&](std::string_view k, std::string_view v) {
                             if (k.size() != session_id.size() + 9)
                               return 0;
                             stored_message m;
                             if (!decode_message(v, m))
                               return static_cast<int>(MDB_CORRUPTED);
                             out.push_back(std::move(m));
                             return 0;
                           });
      if (rc != 0)
        error = "read messages";
      return rc;
    },
    "load_messages");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

store_result<uint64_t> session_store::message_count() const {
  uint64_t n = 0;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string&) {
      MDB_stat ms;
      int rc = mdb_stat(txn, msg_by_id_, &ms);
      n = ms.ms_entries;
      return rc;
    },
    "message_count");
  if (!st)
    return store_result<uint64_t>{st};
  return store_result<uint64_t>{n};
}

// -- search -------------------------------------------------------------------

store_result<search_results>
session_store::search(const search_request& req) const {
  using result = store_result<search_results>;
  auto q = parse_fts_query(req.query);
  if (q.empty())
    return result::failure(status_code::invalid_argument, "search: the query has no searchable words "
                           "(letters or digits, at most 64 bytes each)");
  if (req.limit == 0 || req.limit > max_search_limit)
    return result::failure(status_code::invalid_argument, "search: limit must be between 1 and "
                           + std::to_string(max_search_limit));
  fts_filter filter;
  filter.limit = req.limit;
  filter.offset = req.offset;
  for (auto& r : req.roles) {
    auto code = fts_role_of(r);
    if (code == fts_role::other)
      return result::failure(status_code::invalid_argument, "search: unknown role '"
                             + json::sanitize_utf8(r.substr(0, 40))
                             + "'; use system, user, assistant or tool");
    filter.role_mask |= 1u << static_cast<unsigned>(code);
  }
  if (!req.session_id.empty())
    if (auto err = check_session_id(req.session_id); !err.empty())
      return result::failure(status_code::invalid_argument, "search: " + err);
  search_results out;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      out = search_results{};
      if (!req.session_id.empty()) {
        session_info s;
        if (int rc = read_session(txn, sessions_, req.session_id, s, error);
            rc != 0)
          return rc;
        filter.accept = [&](uint64_t id) {
          std::string_view v;
          return lmdb_env::get(txn, msg_by_id_, codec::be64(id), v) == 0
                 && v == req.session_id;
        };
      }
      fts_search_out found;
      if (int rc = fts_.search(txn, q, filter, found, error); rc != 0)
        return rc;
      out.total = found.total;
      for (auto& m : found.matches) {
        search_hit h;
        h.message_id = m.message_id;
        h.role = fts_role_name(m.role);
        h.score = m.score;
        std::string_view sid;
        int rc = lmdb_env::get(txn, msg_by_id_, codec::be64(m.message_id),
                               sid);
        std::string_view rec;
        if (rc == 0)
          rc = lmdb_env::get(txn, msgs_, msg_key(sid, m.message_id), rec);
        stored_message sm;
        if (rc == 0 && !decode_message(rec, sm))
          rc = MDB_CORRUPTED;
        if (rc != 0) {
          error = "load message " + std::to_string(m.message_id);
          return rc;
        }
        h.session_id = std::string{sid};
        h.snippet = fts_index::snippet(indexed_text(sm.message), q);
        out.hits.push_back(std::move(h));
      }
      return 0;
    },
    "search");
  if (!st)
    return result{st};
  return result{std::move(out)};
}

// -- maintenance --------------------------------------------------------------

store_status session_store::verify(bool deep) const {
  std::vector<std::string> problems;
  auto st = env_->read(
    [&](MDB_txn* txn, std::string& error) {
      std::unordered_map<uint64_t, fts_role> roles;
      std::map<std::string, std::pair<int64_t, int64_t>> counted;
      uint64_t max_id = 0;
      int rc = scan_prefix(
        txn, msgs_, "", [&](std::string_view k, std::string_view v) {
          stored_message m;
          if (!decode_message(v, m)) {
            problems.push_back("undecodable message record");
            return 0;
          }
          if (k != msg_key(m.session_id, m.id))
            problems.push_back("message " + std::to_string(m.id)
                               + " is stored under the wrong key");
          std::string_view sid;
          if (lmdb_env::get(txn, msg_by_id_, codec::be64(m.id), sid) != 0
              || sid != m.session_id)
            problems.push_back("message " + std::to_string(m.id)
                               + " has no matching msg_by_id entry");
          roles[m.id] = fts_role_of(m.message.role);
          max_id = std::max(max_id, m.id);
          auto& c = counted[m.session_id];
          c.first += 1;
          c.second += static_cast<int64_t>(m.message.tool_calls.size());
          if (deep) {
            std::string err;
            int r = fts_.verify_document(txn, m.id, indexed_text(m.message),
                                         problems, err);
            if (r != 0)
              return r;
          }
          return 0;
        });
      if (rc != 0) {
        error = "scan messages";
        return rc;
      }
      MDB_stat ms;
      if ((rc = mdb_stat(txn, msg_by_id_, &ms)) != 0)
        return rc;
      if (ms.ms_entries != roles.size())
        problems.push_back("msg_by_id holds " + std::to_string(ms.ms_entries)
                           + " entries for " + std::to_string(roles.size())
                           + " messages");
      std::string_view v;
      rc = lmdb_env::get(txn, meta_, next_id_key, v);
      uint64_t next_id = rc == 0 && v.size() == 8 ? codec::read_be64(v.data())
                                                  : 1;
      if (max_id >= next_id)
        problems.push_back("message id " + std::to_string(max_id)
                           + " is not below next_message_id "
                           + std::to_string(next_id));
      rc = scan_prefix(
        txn, sessions_, "", [&](std::string_view k, std::string_view val) {
          session_info s;
          std::string err;
          if (!decode_session(val, s, err)) {
            problems.push_back("session " + std::string{k} + ": " + err);
            return 0;
          }
          auto c = counted[s.id];
          counted.erase(s.id);
          if (s.message_count != c.first || s.tool_call_count != c.second)
            problems.push_back(
              "session " + s.id + " counts " + std::to_string(s.message_count)
              + " messages / " + std::to_string(s.tool_call_count)
              + " tool calls but holds " + std::to_string(c.first) + " / "
              + std::to_string(c.second));
          std::string_view tv;
          if (lmdb_env::get(txn, by_time_, time_key(s.started_at_ms, s.id),
                            tv)
              != 0)
            problems.push_back("session " + s.id
                               + " is missing from sessions_by_time");
          return 0;
        });
      if (rc != 0) {
        error = "scan sessions";
        return rc;
      }
      for (auto& entry : counted)
        problems.push_back(std::to_string(entry.second.first)
                           + " messages belong to missing session "
                           + entry.first);
      rc = scan_prefix(
        txn, msg_keys_, "", [&](std::string_view k, std::string_view val) {
          if (val.size() != 8 || roles.count(codec::read_be64(val.data())) == 0)
            problems.push_back("idempotency key " + json::sanitize_utf8(k)
                               + " points to a missing message");
          return 0;
        });
      if (rc != 0) {
        error = "scan idempotency keys";
        return rc;
      }
      return fts_.verify(
        txn,
        [&](uint64_t id, fts_role& role) {
          auto it = roles.find(id);
          if (it == roles.end())
            return false;
          role = it->second;
          return true;
        },
        roles.size(), problems, error);
    },
    "verify");
  if (!st)
    return st;
  if (problems.empty())
    return {};
  std::string msg = "verify: " + std::to_string(problems.size())
                    + " problem(s): ";
  for (size_t i = 0; i < problems.size() && i < 20; ++i)
    msg += (i > 0 ? "; " : "") + problems[i];
  return store_status::failure(status_code::data_corrupt, msg);
}

} // namespace mibyan
