// Stateless requests of `mibyan serve` leave nothing behind (docs/serve.md,
// "Sessions"): when the turn of a request without X-Mibyan-Session ends,
// however it ends, its conversation is closed and its session, with every
// session descended from it (compression continuations, subagents), is
// deleted from the store on the store thread, right after the client got
// its answer (so the deletion's commit is not on the answer's path). Leftovers of a
// process killed mid-turn are swept by the next server.
#include "serve/impl.hpp"

#include <cerrno>
#include <set>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include "base/log.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

namespace {

// Deletes `root` and its descendants, children first. Blocking (LMDB
// commits); a session that does not exist (a turn that never started) is
// no error.
void delete_tree(session_store& store, const std::string& root) {
  constexpr size_t max_sessions = 10000; // a bound for damaged links
  std::vector<std::string> order{root};
  std::set<std::string> seen{root};
  for (size_t i = 0; i < order.size() && order.size() < max_sessions; ++i)
    if (auto kids = store.list_children(order[i]))
      for (auto& k : *kids)
        if (seen.insert(k).second)
          order.push_back(k);
  for (auto i = order.rbegin(); i != order.rend(); ++i)
    if (auto st = store.delete_session(*i);
        !st && st.code != status_code::not_found)
      MIBYAN_LOG(warning, "serve",
                 "cannot delete stateless session " << *i << ": "
                                                     << st.error);
}

// The pid of the server that made stateless session `id` ("...@<pid>"),
// 0 when `id` is not of that form.
pid_t owner_of(const std::string& id) {
  auto at = id.rfind('@');
  if (at == std::string::npos || at + 1 == id.size()
      || id.size() - at > 11)
    return 0;
  pid_t pid = 0;
  for (size_t i = at + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9')
      return 0;
    pid = pid * 10 + (id[i] - '0');
  }
  return pid;
}

} // namespace

std::string http_server::impl::stateless_id() const {
  return cfg.new_session_id() + "@" + std::to_string(::getpid());
}

void http_server::impl::sweep_stateless_leftovers() {
  auto store = session_store_of(rt);
  if (!store)
    return;
  // Collected first: deleting shifts the pages of the listing.
  std::vector<std::string> dead;
  constexpr size_t page = 1000;
  for (size_t offset = 0;; offset += page) {
    auto list = store->list_sessions(page, offset);
    if (!list)
      return;
    for (auto& s : *list) {
      if (s.source != "api-stateless" || !s.parent_session_id.empty())
        continue;
      auto pid = owner_of(s.id);
      // A live owner (or one we may not signal) keeps its sessions.
      if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0
          && errno == ESRCH)
        dead.push_back(s.id);
    }
    if (list->size() < page)
      break;
  }
  for (auto& id : dead)
    delete_tree(*store, id);
  if (!dead.empty())
    MIBYAN_LOG(info, "serve",
               "deleted " << dead.size()
                          << " stateless session(s) left by servers that "
                             "no longer run");
}

void http_server::impl::discard_stateless(const std::string& root,
                                          std::function<void()> then) {
  std::lock_guard<std::mutex> g{mtx};
  if (store_closed)
    return; // shutdown: discard_remaining_stateless deletes it
  auto self = shared_from_this();
  boost::asio::post(store_pool, [self, root, then = std::move(then)] {
    self->rt.close_session(root); // its conversation, kernels, processes
    if (auto store = session_store_of(self->rt))
      delete_tree(*store, root);
    {
      std::lock_guard<std::mutex> g2{self->mtx};
      self->stateless.erase(root);
    }
    if (then)
      then();
  });
}

void http_server::impl::discard_remaining_stateless() {
  std::set<std::string> left;
  {
    std::lock_guard<std::mutex> g{mtx};
    left.swap(stateless);
  }
  auto store = session_store_of(rt);
  for (auto& root : left) {
    rt.close_session(root);
    if (store)
      delete_tree(*store, root);
  }
}

} // namespace mibyan
