#include "actors/session_writer.hpp"

#include <vector>

#include "caf/all.hpp"

#include "actors/error_mapping.hpp"
#include "base/log.hpp"
#include "storage/session_lease.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

// The private interface adds the flush the actor sends itself: it queues
// behind every request already in the mailbox, so one commit takes all of
// them (docs/storage.md, "Group commit").
using writer_impl_actor
  = session_writer_actor::extend<caf::reacts_to<done_atom>>;

// Largest group: past this many queued writes the group is committed at
// once, keeping a transaction (and the pages it dirties) bounded.
constexpr size_t max_group = 1024;

// The reply owed for one queued write.
struct pending_reply {
  caf::typed_response_promise<std::string> created;
  caf::typed_response_promise<uint64_t> appended;
  caf::typed_response_promise<bool> done;
};

struct writer_state {
  std::shared_ptr<session_store> store;
  std::shared_ptr<lease_tokens> tokens;
  std::vector<store_write> writes;
  std::vector<pending_reply> replies;
  bool flush_queued = false;
  static inline const char* name = "session_writer";
  ~writer_state();
};

using writer_pointer = writer_impl_actor::stateful_pointer<writer_state>;

// Commits the queued writes in one transaction, then answers each caller.
void flush(writer_state& st) {
  if (st.writes.empty())
    return;
  std::vector<store_write> writes;
  std::vector<pending_reply> replies;
  writes.swap(st.writes);
  replies.swap(st.replies);
  (void) st.store->commit_group(writes);
  for (size_t i = 0; i < writes.size(); ++i) {
    auto& w = writes[i];
    auto& r = replies[i];
    if (!w.status.ok() && w.what == store_write::kind::append)
      MIBYAN_LOG(error, "store", "append to " << w.append.session_id
                 << " failed: " << w.status.error);
    switch (w.what) {
      case store_write::kind::create:
        if (w.status.ok())
          r.created.deliver(std::move(w.created.id));
        else
          r.created.deliver(to_actor_error(w.status));
        break;
      case store_write::kind::append:
        if (w.status.ok())
          r.appended.deliver(w.appended.id);
        else
          r.appended.deliver(to_actor_error(w.status));
        break;
      case store_write::kind::usage:
      case store_write::kind::end:
        if (w.status.ok())
          r.done.deliver(true);
        else
          r.done.deliver(to_actor_error(w.status));
        break;
    }
  }
}

// Writes accepted before the actor stopped are committed and answered.
writer_state::~writer_state() {
  if (store)
    flush(*this);
}

// Queues `w` and schedules a flush behind the requests already waiting.
void enqueue(writer_pointer self, store_write w, pending_reply r) {
  auto& st = self->state;
  if (st.tokens && w.what != store_write::kind::create)
    w.fence = st.tokens->of(w.what == store_write::kind::append
                              ? w.append.session_id
                              : w.session_id);
  st.writes.push_back(std::move(w));
  st.replies.push_back(std::move(r));
  if (st.writes.size() >= max_group) {
    flush(st);
    return;
  }
  if (!st.flush_queued) {
    st.flush_queued = true;
    self->send(self, done_atom_v);
  }
}

writer_impl_actor::behavior_type
writer(writer_pointer self, std::shared_ptr<session_store> store,
       std::shared_ptr<lease_tokens> tokens) {
  self->state.store = std::move(store);
  self->state.tokens = std::move(tokens);
  return {
    [=](create_atom, session_meta& m) -> caf::result<std::string> {
      store_write w;
      w.what = store_write::kind::create;
      w.create.id = std::move(m.id);
      w.create.source = std::move(m.source);
      w.create.model = std::move(m.model);
      w.create.provider = std::move(m.provider);
      w.create.cwd = std::move(m.cwd);
      w.create.title = std::move(m.title);
      w.create.parent_session_id = std::move(m.parent_session_id);
      w.create.metadata_json = std::move(m.metadata_json);
      pending_reply r;
      r.created = self->make_response_promise<std::string>();
      auto out = r.created;
      enqueue(self, std::move(w), std::move(r));
      return out;
    },
    [=](append_atom, message_append& a) -> caf::result<uint64_t> {
      store_write w;
      w.what = store_write::kind::append;
      w.append.session_id = std::move(a.session_id);
      w.append.message = std::move(a.message);
      w.append.key = std::move(a.key);
      pending_reply r;
      r.appended = self->make_response_promise<uint64_t>();
      auto out = r.appended;
      enqueue(self, std::move(w), std::move(r));
      return out;
    },
    [=](usage_atom, usage_update& u) -> caf::result<bool> {
      store_write w;
      w.what = store_write::kind::usage;
      w.session_id = std::move(u.session_id);
      w.usage = u.usage;
      w.api_calls = u.api_calls;
      pending_reply r;
      r.done = self->make_response_promise<bool>();
      auto out = r.done;
      enqueue(self, std::move(w), std::move(r));
      return out;
    },
    [=](end_atom, std::string& id, std::string& reason) -> caf::result<bool> {
      store_write w;
      w.what = store_write::kind::end;
      w.session_id = std::move(id);
      w.reason = std::move(reason);
      pending_reply r;
      r.done = self->make_response_promise<bool>();
      auto out = r.done;
      enqueue(self, std::move(w), std::move(r));
      return out;
    },
    [=](done_atom) {
      self->state.flush_queued = false;
      flush(self->state);
    },
  };
}

} // namespace

session_writer_actor
spawn_session_writer(caf::actor_system& sys,
                     std::shared_ptr<session_store> store,
                     std::shared_ptr<lease_tokens> tokens) {
  return sys.spawn<caf::detached>(writer, std::move(store),
                                  std::move(tokens));
}

} // namespace mibyan
